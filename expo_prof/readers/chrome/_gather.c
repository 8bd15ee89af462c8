/* Columns of one batch of decoded Chrome-trace events, gathered in C (issue 41).

The Chrome reader decodes a few thousand events at a time into msgspec Structs
(decode.py) and makes numpy columns of them (batch.py). In Python every column
costs a list comprehension over the batch plus a conversion (about 0.6 us an
event in all: more than the decode itself); here each is one C loop that reads
the Struct's slots directly and writes the column into a bytearray that numpy
wraps without a copy.

Each function does only the plain case, where its answer is the Python path's
by construction, and returns None for anything else (a name that is no string
or a long one, a time that is no int or float, or out of the exact range, an
``args`` that is null): batch.py then takes the Python path for that batch,
which keeps every rule for odd input. Code tables are filled as the Python
path fills them (first-seen order, ``ids[v] = len(ids)``); a call that hands
back or fails (an unhashable key raises TypeError, as the Python path's dict
does) takes its new entries out again, so the Python path finds the tables as
they were.

Pure CPython C API (no numpy headers): optional at install; without it the
Python path does the same work. Built with -ffp-contract=off: the time
conversion must round exactly as timeparse.us_floats_to_ns does.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* One attribute of the batch's Struct type: its slot offset when it is a plain object slot of that type, else
   read with getattr. */
typedef struct {
    PyTypeObject *tp;
    Py_ssize_t off;
    PyObject *name;
} Getter;

static void getter_init(Getter *g, PyTypeObject *tp, PyObject *name) {
    g->tp = tp;
    g->off = -1;
    g->name = name;
    if (tp == NULL) return;
    PyObject *d = PyObject_GetAttr((PyObject *)tp, name);
    if (d == NULL) {
        PyErr_Clear();
        return;
    }
    if (Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && PyType_IsSubtype(tp, PyDescr_TYPE(d))) g->off = m->offset;
    }
    Py_DECREF(d);
}

/* A new reference to the attribute of o, or NULL with an exception set. */
static inline PyObject *get(const Getter *g, PyObject *o) {
    if (g->off >= 0 && Py_TYPE(o) == g->tp) {
        PyObject *v = *(PyObject **)((char *)o + g->off);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(o, g->name);
}

/* The selection: None (every event) or a buffer of one byte per event (a numpy bool array). */
typedef struct {
    Py_buffer view;
    const unsigned char *m;
    Py_ssize_t kept;
} Sel;

static int sel_init(Sel *s, PyObject *obj, Py_ssize_t n) {
    s->m = NULL;
    s->kept = n;
    if (obj == Py_None) return 0;
    if (PyObject_GetBuffer(obj, &s->view, PyBUF_SIMPLE) < 0) return -1;
    if (s->view.len != n) {
        PyBuffer_Release(&s->view);
        PyErr_SetString(PyExc_ValueError, "selection length differs from the events'");
        return -1;
    }
    s->m = (const unsigned char *)s->view.buf;
    s->kept = 0;
    for (Py_ssize_t i = 0; i < n; i++) s->kept += s->m[i] != 0;
    return 0;
}

static void sel_release(Sel *s) {
    if (s->m != NULL) PyBuffer_Release(&s->view);
}

/* Py_XDECREF of the first n of v. */
static void drop(PyObject **v, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(v[i]);
}

#define SLOTS 4

static PyTypeObject *first_type(PyObject *events) {
    return PyList_GET_SIZE(events) ? Py_TYPE(PyList_GET_ITEM(events, 0)) : NULL;
}

/* code of key in ids, added as len(ids) when new (and to the list ``added``); -1 with an exception set on
   error. */
static long code_of(PyObject *ids, PyObject *key, PyObject **added) {
    PyObject *c = PyDict_GetItemWithError(ids, key);
    if (c != NULL) return PyLong_AsLong(c);
    if (PyErr_Occurred()) return -1;
    Py_ssize_t n = PyDict_GET_SIZE(ids);
    if (*added == NULL && (*added = PyList_New(0)) == NULL) return -1;
    PyObject *v = PyLong_FromSsize_t(n);
    if (v == NULL) return -1;
    int r = PyDict_SetItem(ids, key, v);
    Py_DECREF(v);
    if (r < 0 || PyList_Append(*added, key) < 0) return -1;
    return (long)n;
}

/* A call that fails or hands back leaves ``ids`` as it found it: the Python path then fills it itself (a batch
   with an unhashable key drops its malformed events first, and the others' keys come in their order). The
   entries added here were the last ones, so the dict's order is as before. The exception, if any, is kept. */
static void undo(PyObject *ids, PyObject *added) {
    if (added == NULL) return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    for (Py_ssize_t i = PyList_GET_SIZE(added) - 1; i >= 0; i--)
        if (PyDict_DelItem(ids, PyList_GET_ITEM(added, i)) < 0) PyErr_Clear();
    Py_DECREF(added);
    PyErr_Restore(et, ev, tb);
}

PyDoc_STRVAR(key_codes_doc,
"key_codes(events, attrs, ids, sel) -> bytearray\n\n"
"int32 codes of the tuples of ``attrs`` of the selected events in ``ids`` (a dict of value -> code, new tuples\n"
"added as ``len(ids)`` in first-seen order); TypeError on an unhashable value.");

static PyObject *key_codes(PyObject *self, PyObject *args) {
    PyObject *events, *attrs, *ids, *selobj;
    if (!PyArg_ParseTuple(args, "O!O!O!O", &PyList_Type, &events, &PyTuple_Type, &attrs, &PyDict_Type, &ids, &selobj))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(events), k = PyTuple_GET_SIZE(attrs);
    if (k < 1 || k > 8) {
        PyErr_SetString(PyExc_ValueError, "1 to 8 attributes");
        return NULL;
    }
    Getter g[8];
    PyTypeObject *tp = first_type(events);
    for (Py_ssize_t j = 0; j < k; j++) getter_init(&g[j], tp, PyTuple_GET_ITEM(attrs, j));
    Sel s;
    if (sel_init(&s, selobj, n) < 0) return NULL;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, s.kept * (Py_ssize_t)sizeof(int32_t));
    if (out == NULL) goto fail_sel;
    int32_t *w = (int32_t *)PyByteArray_AS_STRING(out);
    /* The last few distinct keys: a batch has a few dozen, and runs of one or two (a kernel and its launch, a
       flow's two ends) come in turn. An event is compared with them item by item, as the tuple's == compares, so
       a hit is the key the dict would find (equal keys hash alike; a slot only ever holds a key that was looked
       up, never an unhashable one), and builds no tuple. */
    PyObject *slot[SLOTS] = {NULL};
    long slot_code[SLOTS];
    /* Each slot item that is an exact int in one C long, as is each event's: two exact ints are equal when their
       values are (pids and tids are fresh int objects per event, and a C comparison is a fraction of ==). */
    long slot_ival[SLOTS][8];
    char slot_isint[SLOTS][8];
    int last = 0, next = 0;
    PyObject *added = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s.m != NULL && !s.m[i]) continue;
        PyObject *e = PyList_GET_ITEM(events, i);
        PyObject *v[8];
        long ival[8];
        char isint[8];
        for (Py_ssize_t j = 0; j < k; j++) {
            v[j] = get(&g[j], e);
            if (v[j] == NULL) {
                drop(v, j);
                goto fail;
            }
            isint[j] = 0;
            if (PyLong_CheckExact(v[j])) {
                int over;
                ival[j] = PyLong_AsLongAndOverflow(v[j], &over);
                isint[j] = !over && !(ival[j] == -1 && PyErr_Occurred());
            }
        }
        int hit = -1;
        for (int t = 0; t < SLOTS && hit < 0; t++) {
            int q = (last + t) % SLOTS;
            if (slot[q] == NULL) continue;
            int same = 1;
            for (Py_ssize_t j = k - 1; same == 1 && j >= 0; j--) {  /* (the thread differs most often) */
                PyObject *p = k == 1 ? slot[q] : PyTuple_GET_ITEM(slot[q], j);
                if (p == v[j])
                    same = 1;
                else if (isint[j] && slot_isint[q][j])
                    same = ival[j] == slot_ival[q][j];
                else
                    same = PyObject_RichCompareBool(p, v[j], Py_EQ);
            }
            if (same < 0) {
                drop(v, k);
                goto fail;
            }
            if (same) hit = q;
        }
        if (hit >= 0) {
            drop(v, k);
        } else {
            PyObject *kk;
            if (k == 1) {
                kk = v[0];
            } else {
                kk = PyTuple_New(k);
                if (kk == NULL) {
                    drop(v, k);
                    goto fail;
                }
                for (Py_ssize_t j = 0; j < k; j++) PyTuple_SET_ITEM(kk, j, v[j]);  /* (the references move in) */
            }
            long code = code_of(ids, kk, &added);
            if (code < 0) {
                Py_DECREF(kk);
                goto fail;
            }
            hit = next;
            next = (next + 1) % SLOTS;
            Py_XSETREF(slot[hit], kk);  /* the reference is kept */
            slot_code[hit] = code;
            memcpy(slot_ival[hit], ival, sizeof ival);
            memcpy(slot_isint[hit], isint, sizeof isint);
        }
        last = hit;
        *w++ = (int32_t)slot_code[hit];
    }
    drop(slot, SLOTS);
    Py_XDECREF(added);
    sel_release(&s);
    return out;
fail:
    undo(ids, added);
    drop(slot, SLOTS);
    Py_DECREF(out);
fail_sel:
    sel_release(&s);
    return NULL;
}

#define NAME_CACHE 1024

/* The cache slot of a str: its length and a few of its characters. */
static inline int name_slot(PyObject *v) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(v);
    size_t h = (size_t)len * 2654435761u;
    if (len) {
        int kind = PyUnicode_KIND(v);
        const void *d = PyUnicode_DATA(v);
        h ^= PyUnicode_READ(kind, d, 0) * 31u + PyUnicode_READ(kind, d, len - 1) * 131u +
             PyUnicode_READ(kind, d, len / 2) * 1031u + PyUnicode_READ(kind, d, len / 3) * 7u +
             PyUnicode_READ(kind, d, (2 * len) / 3) * 17u;
        h ^= h >> 11;
    }
    return (int)(h & (NAME_CACHE - 1));
}

PyDoc_STRVAR(str_codes_doc,
"str_codes(events, attr, ids, sel, maxlen) -> bytearray | None\n\n"
"int32 codes in ``ids`` of the selected events' ``attr``, when every one is a str of at most ``maxlen``\n"
"characters (new ones added as ``len(ids)`` in first-seen order) or a longer one that is a key of ``ids``\n"
"already; None at the first that is not.");

static PyObject *str_codes(PyObject *self, PyObject *args) {
    PyObject *events, *attr, *ids, *selobj;
    Py_ssize_t maxlen;
    if (!PyArg_ParseTuple(args, "O!UO!On", &PyList_Type, &events, &attr, &PyDict_Type, &ids, &selobj, &maxlen))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(events);
    Getter g;
    getter_init(&g, first_type(events), attr);
    Sel s;
    if (sel_init(&s, selobj, n) < 0) return NULL;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, s.kept * (Py_ssize_t)sizeof(int32_t));
    if (out == NULL) goto fail_sel;
    int32_t *w = (int32_t *)PyByteArray_AS_STRING(out);
    /* The strings looked up so far, by a cheap index: names repeat (a batch has a few dozen distinct ones), and
       comparing the bytes of two equal strings is cheaper than hashing a fresh one (msgspec makes a new str per
       event). Equal strs have one kind and the same bytes (PEP 393), so a hit is what the dict would find. */
    PyObject *seen[NAME_CACHE] = {NULL};
    long seen_code[NAME_CACHE];
    PyObject *added = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s.m != NULL && !s.m[i]) continue;
        PyObject *v = get(&g, PyList_GET_ITEM(events, i));
        if (v == NULL) goto fail;
        int h = -1;
        if (PyUnicode_CheckExact(v)) {
            h = name_slot(v);
            PyObject *o = seen[h];
            if (o != NULL && (o == v || (PyUnicode_GET_LENGTH(o) == PyUnicode_GET_LENGTH(v) &&
                                         PyUnicode_KIND(o) == PyUnicode_KIND(v) &&
                                         memcmp(PyUnicode_DATA(o), PyUnicode_DATA(v),
                                                PyUnicode_GET_LENGTH(v) * PyUnicode_KIND(v)) == 0))) {
                Py_DECREF(v);
                *w++ = (int32_t)seen_code[h];
                continue;
            }
        }
        long code;
        if (h >= 0 && PyUnicode_GET_LENGTH(v) <= maxlen) {
            code = code_of(ids, v, &added);
            if (code < 0) {
                Py_DECREF(v);
                goto fail;
            }
        } else {
            /* A longer str that is a key already was kept whole before (a cut name is short): the long-name budget
               keeps it whole again. Anything else (a new long name, a non-str) is the Python path's. */
            PyObject *c = h >= 0 ? PyDict_GetItemWithError(ids, v) : NULL;
            if (c == NULL) {
                Py_DECREF(v);
                if (PyErr_Occurred()) goto fail;
                undo(ids, added);
                drop(seen, NAME_CACHE);
                Py_DECREF(out);
                sel_release(&s);
                Py_RETURN_NONE;
            }
            code = PyLong_AsLong(c);
        }
        Py_XSETREF(seen[h], v);  /* the reference is kept */
        seen_code[h] = code;
        *w++ = (int32_t)code;
    }
    drop(seen, NAME_CACHE);
    Py_XDECREF(added);
    sel_release(&s);
    return out;
fail:
    undo(ids, added);
    drop(seen, NAME_CACHE);
    Py_DECREF(out);
fail_sel:
    sel_release(&s);
    return NULL;
}

/* Exact round(x * 1000) half away from zero for |x| < 2**53 / 2**9, as timeparse.us_floats_to_ns: the product is
   formed in integers (53-bit mantissa x 1000), then one rounding shift. */
static inline int64_t us_float_to_ns(double x) {
    int neg = x < 0;
    double ax = fabs(x);
    if (ax == 0.0) return 0;
    int e;
    double m = frexp(ax, &e);
    uint64_t prod = (uint64_t)(int64_t)(m * 9007199254740992.0) * 1000u;
    int shift = 53 - e;
    int64_t r;
    if (shift >= 62)
        r = (int64_t)floor(ax * 1000.0 + 0.5);
    else
        r = (int64_t)((prod + ((uint64_t)1 << (shift - 1))) >> shift);
    return neg ? -r : r;
}

PyDoc_STRVAR(times_ns_doc,
"times_ns(events, attr, sel, limit_us) -> bytearray | None\n\n"
"int64 ns of the selected events' ``attr`` (µs), when every one is an int (x 1000 without overflow) or a float\n"
"under ``limit_us`` in magnitude (rounded exactly); None at the first that is not.");

static PyObject *times_ns(PyObject *self, PyObject *args) {
    PyObject *events, *attr, *selobj;
    double limit;
    if (!PyArg_ParseTuple(args, "O!UOd", &PyList_Type, &events, &attr, &selobj, &limit)) return NULL;
    /* The rounding shift needs |x| < 2**52 (it is >= 1 there); the reader's limit is 2**43. */
    if (!(limit <= 4503599627370496.0)) {
        PyErr_SetString(PyExc_ValueError, "limit_us must be at most 2**52");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(events);
    Getter g;
    getter_init(&g, first_type(events), attr);
    Sel s;
    if (sel_init(&s, selobj, n) < 0) return NULL;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, s.kept * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) goto fail_sel;
    int64_t *w = (int64_t *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s.m != NULL && !s.m[i]) continue;
        PyObject *v = get(&g, PyList_GET_ITEM(events, i));
        if (v == NULL) goto fail;
        int ok = 0;
        if (PyFloat_CheckExact(v)) {
            double x = PyFloat_AS_DOUBLE(v);
            if (fabs(x) < limit) {  /* (NaN fails it) */
                *w++ = us_float_to_ns(x);
                ok = 1;
            }
        } else if (PyLong_CheckExact(v)) {
            int over = 0;
            long long x = PyLong_AsLongLongAndOverflow(v, &over);
            if (!over && x <= INT64_MAX / 1000 && x >= INT64_MIN / 1000) {
                *w++ = (int64_t)x * 1000;
                ok = 1;
            }
        }
        Py_DECREF(v);
        if (!ok) {
            Py_DECREF(out);
            sel_release(&s);
            Py_RETURN_NONE;
        }
    }
    sel_release(&s);
    return out;
fail:
    Py_DECREF(out);
fail_sel:
    sel_release(&s);
    return NULL;
}

PyDoc_STRVAR(ints_doc,
"ints(events, attr, sub, sel) -> bytearray | None\n\n"
"int64 of the selected events' ``attr.sub`` (``attr`` when ``sub`` is None), when every ``attr`` has it and\n"
"every value is an int within int64; None at the first that is not.");

static PyObject *ints(PyObject *self, PyObject *args) {
    PyObject *events, *attr, *sub, *selobj;
    if (!PyArg_ParseTuple(args, "O!UOO", &PyList_Type, &events, &attr, &sub, &selobj)) return NULL;
    if (sub != Py_None && !PyUnicode_Check(sub)) {
        PyErr_SetString(PyExc_TypeError, "sub must be a str or None");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(events);
    Getter g, gs;
    getter_init(&g, first_type(events), attr);
    gs.tp = NULL;
    gs.off = -1;
    gs.name = sub;
    Sel s;
    if (sel_init(&s, selobj, n) < 0) return NULL;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, s.kept * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) goto fail_sel;
    int64_t *w = (int64_t *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s.m != NULL && !s.m[i]) continue;
        PyObject *a = get(&g, PyList_GET_ITEM(events, i));
        if (a == NULL) goto fail;
        PyObject *v = a;
        if (sub != Py_None) {
            if (gs.tp != Py_TYPE(a)) getter_init(&gs, Py_TYPE(a), sub);  /* (None has no such slot: getattr fails) */
            v = get(&gs, a);
            Py_DECREF(a);
        }
        int ok = 0;
        if (v == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) goto fail;
            PyErr_Clear();
        } else {
            if (PyLong_CheckExact(v)) {
                int over = 0;
                long long x = PyLong_AsLongLongAndOverflow(v, &over);
                if (!over) {
                    *w++ = (int64_t)x;
                    ok = 1;
                }
            }
            Py_DECREF(v);
        }
        if (!ok) {
            Py_DECREF(out);
            sel_release(&s);
            Py_RETURN_NONE;
        }
    }
    sel_release(&s);
    return out;
fail:
    Py_DECREF(out);
fail_sel:
    sel_release(&s);
    return NULL;
}

static PyMethodDef methods[] = {
    {"key_codes", key_codes, METH_VARARGS, key_codes_doc},
    {"str_codes", str_codes, METH_VARARGS, str_codes_doc},
    {"times_ns", times_ns, METH_VARARGS, times_ns_doc},
    {"ints", ints, METH_VARARGS, ints_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "expo_prof.readers.chrome._gather",
    "Columns of one batch of decoded Chrome-trace events, gathered in C (see _gather.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__gather(void) { return PyModule_Create(&module); }
