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

/* A bytearray of n items of size bytes, and where its data starts. */
static PyObject *column(Py_ssize_t n, size_t size, void **data) {
    PyObject *b = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)size);
    if (b != NULL) *data = PyByteArray_AS_STRING(b);
    return b;
}

PyDoc_STRVAR(key_codes_doc,
"key_codes(events, attrs, ids) -> bytearray\n\n"
"int32 codes of the tuples of ``attrs`` of every event in ``ids`` (a dict of value -> code, new tuples\n"
"added as ``len(ids)`` in first-seen order); TypeError on an unhashable value.");

static PyObject *key_codes(PyObject *self, PyObject *args) {
    PyObject *events, *attrs, *ids;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyList_Type, &events, &PyTuple_Type, &attrs, &PyDict_Type, &ids))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(events), k = PyTuple_GET_SIZE(attrs);
    if (k < 1 || k > 8) {
        PyErr_SetString(PyExc_ValueError, "1 to 8 attributes");
        return NULL;
    }
    Getter g[8];
    PyTypeObject *tp = first_type(events);
    for (Py_ssize_t j = 0; j < k; j++) getter_init(&g[j], tp, PyTuple_GET_ITEM(attrs, j));
    int32_t *w;
    PyObject *out = column(n, sizeof *w, (void **)&w);
    if (out == NULL) return NULL;
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
    return out;
fail:
    undo(ids, added);
    drop(slot, SLOTS);
    Py_DECREF(out);
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

/* Names coded into a table. ``seen`` holds the strings looked up so far, by a cheap index: names repeat (a batch
   has a few dozen distinct ones), and comparing the bytes of two equal strings is cheaper than hashing a fresh one
   (msgspec makes a new str per event). Equal strs have one kind and the same bytes (PEP 393), so a hit is what the
   dict would find. */
typedef struct {
    PyObject *ids, *added;
    Py_ssize_t maxlen;
    PyObject *seen[NAME_CACHE];
    long seen_code[NAME_CACHE];
} Names;

static void names_init(Names *nm, PyObject *ids, Py_ssize_t maxlen) {
    nm->ids = ids;
    nm->added = NULL;
    nm->maxlen = maxlen;
    memset(nm->seen, 0, sizeof nm->seen);
}

/* The code of v (a new reference, consumed): 1 with *out set; 0 when v is the Python path's (a non-str, a long
   name not kept before); -1 with an exception set. A str of at most maxlen characters is added when new; a longer
   one that is a key already was kept whole before (a cut name is short), and the long-name budget keeps it whole
   again. */
static int names_code(Names *nm, PyObject *v, int32_t *out) {
    if (!PyUnicode_CheckExact(v)) {
        Py_DECREF(v);
        return 0;
    }
    int h = name_slot(v);
    PyObject *o = nm->seen[h];
    Py_ssize_t len = PyUnicode_GET_LENGTH(v);
    if (o != NULL && (o == v || (PyUnicode_GET_LENGTH(o) == len && PyUnicode_KIND(o) == PyUnicode_KIND(v) &&
                                 memcmp(PyUnicode_DATA(o), PyUnicode_DATA(v), len * PyUnicode_KIND(v)) == 0))) {
        Py_DECREF(v);
        *out = (int32_t)nm->seen_code[h];
        return 1;
    }
    long code;
    if (len <= nm->maxlen) {
        code = code_of(nm->ids, v, &nm->added);
        if (code < 0) {
            Py_DECREF(v);
            return -1;
        }
    } else {
        PyObject *c = PyDict_GetItemWithError(nm->ids, v);
        if (c == NULL) {
            Py_DECREF(v);
            return PyErr_Occurred() ? -1 : 0;
        }
        code = PyLong_AsLong(c);
    }
    Py_XSETREF(nm->seen[h], v);  /* the reference is kept */
    nm->seen_code[h] = code;
    *out = (int32_t)code;
    return 1;
}

/* The end of a pass: the cache released; the table's new entries taken out again unless the pass went through. */
static void names_end(Names *nm, int through) {
    drop(nm->seen, NAME_CACHE);
    if (through)
        Py_XDECREF(nm->added);
    else
        undo(nm->ids, nm->added);
}

/* Exact round(x * 1000) half away from zero for |x| < 2**52, as timeparse.us_floats_to_ns: the product is formed
   in integers (53-bit mantissa x 1000), then one rounding shift. */
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

/* A time in µs (v: a new reference, consumed) as ns: 1 with *out set when v is an int (x 1000 without overflow)
   or a float under limit in magnitude; else 0. */
static inline int time_of(PyObject *v, double limit, int64_t *out) {
    int ok = 0;
    if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        if (fabs(x) < limit) { /* (NaN fails it) */
            *out = us_float_to_ns(x);
            ok = 1;
        }
    } else if (PyLong_CheckExact(v)) {
        int over = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &over);
        if (!over && x <= INT64_MAX / 1000 && x >= INT64_MIN / 1000) {
            *out = (int64_t)x * 1000;
            ok = 1;
        }
    }
    Py_DECREF(v);
    return ok;
}

/* An int within int64 (v: a new reference, consumed): 1 with *out set; else 0. */
static inline int int_of(PyObject *v, int64_t *out) {
    int ok = 0;
    if (PyLong_CheckExact(v)) {
        int over = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &over);
        if (!over) {
            *out = (int64_t)x;
            ok = 1;
        }
    }
    Py_DECREF(v);
    return ok;
}

/* ``a.sub`` of an event's ``a`` (a new reference, consumed): a new reference; NULL with no exception set when a
   has no such attribute (``args: null``), NULL with one on another error. */
static PyObject *sub_of(Getter *gs, PyObject *a, PyObject *sub) {
    if (gs->tp != Py_TYPE(a)) getter_init(gs, Py_TYPE(a), sub);
    PyObject *v = get(gs, a);
    Py_DECREF(a);
    if (v == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
    return v;
}


/* limit_us checked: the rounding shift needs |x| < 2**52 (it is >= 1 there); the reader's limit is 2**43. */
static int limit_ok(double limit) {
    if (limit <= 4503599627370496.0) return 1;
    PyErr_SetString(PyExc_ValueError, "limit_us must be at most 2**52");
    return 0;
}

PyDoc_STRVAR(complete_doc,
"complete(events, sel, ids, maxlen, limit_us, corr) -> (name, ts, dur, corr) | None\n\n"
"The columns of the selected complete events in one pass: ``str_codes`` of ``name`` (into ``ids``),\n"
"``times_ns`` of ``ts`` and ``dur``, and ``ints`` of ``args.correlation`` where ``corr`` says (True: every\n"
"selected event; a mask over all events: those it marks; None: none), -1 elsewhere. None when one value is\n"
"not of the plain kind (``ids`` then as it was).");

static PyObject *complete(PyObject *self, PyObject *args) {
    PyObject *events, *selobj, *ids, *corrobj;
    Py_ssize_t maxlen;
    double limit;
    if (!PyArg_ParseTuple(args, "O!OO!ndO", &PyList_Type, &events, &selobj, &PyDict_Type, &ids, &maxlen, &limit,
                          &corrobj) || !limit_ok(limit))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(events);
    PyTypeObject *tp = first_type(events);
    PyObject *a_name = PyUnicode_InternFromString("name"), *a_ts = PyUnicode_InternFromString("ts"),
             *a_dur = PyUnicode_InternFromString("dur"), *a_args = PyUnicode_InternFromString("args"),
             *a_corr = PyUnicode_InternFromString("correlation");
    PyObject *res = NULL, *c_name = NULL, *c_ts = NULL, *c_dur = NULL, *c_corr = NULL;
    Names *nm = NULL;
    Sel s, cs;
    s.m = cs.m = NULL;
    int have_s = 0, have_cs = 0;
    if (!a_name || !a_ts || !a_dur || !a_args || !a_corr) goto done;
    Getter g_name, g_ts, g_dur, g_args, g_corr = {NULL, -1, a_corr};
    getter_init(&g_name, tp, a_name);
    getter_init(&g_ts, tp, a_ts);
    getter_init(&g_dur, tp, a_dur);
    getter_init(&g_args, tp, a_args);
    if (sel_init(&s, selobj, n) < 0) goto done;
    have_s = 1;
    int corr_all = corrobj == Py_True;
    if (!corr_all && corrobj != Py_None) {
        if (sel_init(&cs, corrobj, n) < 0) goto done;
        have_cs = 1;
    }
    int32_t *w_name;
    int64_t *w_ts, *w_dur, *w_corr;
    c_name = column(s.kept, sizeof *w_name, (void **)&w_name);
    c_ts = column(s.kept, sizeof *w_ts, (void **)&w_ts);
    c_dur = column(s.kept, sizeof *w_dur, (void **)&w_dur);
    c_corr = column(s.kept, sizeof *w_corr, (void **)&w_corr);
    nm = PyMem_Malloc(sizeof(Names));
    if (!c_name || !c_ts || !c_dur || !c_corr || !nm) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    names_init(nm, ids, maxlen);
    int ok = 1;
    for (Py_ssize_t i = 0; i < n && ok == 1; i++) {
        if (s.m != NULL && !s.m[i]) continue;
        PyObject *e = PyList_GET_ITEM(events, i), *v;
        ok = (v = get(&g_name, e)) == NULL ? -1 : names_code(nm, v, w_name++);
        if (ok == 1) ok = (v = get(&g_ts, e)) == NULL ? -1 : time_of(v, limit, w_ts++);
        if (ok == 1) ok = (v = get(&g_dur, e)) == NULL ? -1 : time_of(v, limit, w_dur++);
        if (ok == 1) {
            if (corr_all || (cs.m != NULL && cs.m[i])) {
                v = get(&g_args, e);
                if (v != NULL) v = sub_of(&g_corr, v, a_corr);
                ok = v == NULL ? (PyErr_Occurred() ? -1 : 0) : int_of(v, w_corr++);
            } else {
                *w_corr++ = -1;
            }
        }
    }
    names_end(nm, ok == 1);
    if (ok == 1)
        res = PyTuple_Pack(4, c_name, c_ts, c_dur, c_corr);
    else if (ok == 0)
        res = Py_NewRef(Py_None);
done:
    PyMem_Free(nm);
    if (have_s) sel_release(&s);
    if (have_cs) sel_release(&cs);
    Py_XDECREF(c_name);
    Py_XDECREF(c_ts);
    Py_XDECREF(c_dur);
    Py_XDECREF(c_corr);
    Py_XDECREF(a_name);
    Py_XDECREF(a_ts);
    Py_XDECREF(a_dur);
    Py_XDECREF(a_args);
    Py_XDECREF(a_corr);
    return res;
}

PyDoc_STRVAR(flows_doc,
"flows(events, sel, limit_us) -> (id, ts) | None\n\n"
"The columns of the selected flow events in one pass: ``ints`` of ``id`` and ``times_ns`` of ``ts``; None when\n"
"one value is not of the plain kind.");

static PyObject *flows(PyObject *self, PyObject *args) {
    PyObject *events, *selobj;
    double limit;
    if (!PyArg_ParseTuple(args, "O!Od", &PyList_Type, &events, &selobj, &limit) || !limit_ok(limit)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(events);
    PyTypeObject *tp = first_type(events);
    PyObject *a_id = PyUnicode_InternFromString("id"), *a_ts = PyUnicode_InternFromString("ts");
    PyObject *res = NULL, *c_id = NULL, *c_ts = NULL;
    Sel s;
    int have_s = 0;
    if (!a_id || !a_ts) goto done;
    Getter g_id, g_ts;
    getter_init(&g_id, tp, a_id);
    getter_init(&g_ts, tp, a_ts);
    if (sel_init(&s, selobj, n) < 0) goto done;
    have_s = 1;
    int64_t *w_id, *w_ts;
    c_id = column(s.kept, sizeof *w_id, (void **)&w_id);
    c_ts = column(s.kept, sizeof *w_ts, (void **)&w_ts);
    if (!c_id || !c_ts) goto done;
    int ok = 1;
    for (Py_ssize_t i = 0; i < n && ok == 1; i++) {
        if (s.m != NULL && !s.m[i]) continue;
        PyObject *e = PyList_GET_ITEM(events, i), *v;
        ok = (v = get(&g_id, e)) == NULL ? -1 : int_of(v, w_id++);
        if (ok == 1) ok = (v = get(&g_ts, e)) == NULL ? -1 : time_of(v, limit, w_ts++);
    }
    if (ok == 1)
        res = PyTuple_Pack(2, c_id, c_ts);
    else if (ok == 0)
        res = Py_NewRef(Py_None);
done:
    if (have_s) sel_release(&s);
    Py_XDECREF(c_id);
    Py_XDECREF(c_ts);
    Py_XDECREF(a_id);
    Py_XDECREF(a_ts);
    return res;
}

static PyMethodDef methods[] = {
    {"key_codes", key_codes, METH_VARARGS, key_codes_doc},
    {"complete", complete, METH_VARARGS, complete_doc},
    {"flows", flows, METH_VARARGS, flows_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "expo_prof.readers.chrome._gather",
    "Columns of one batch of decoded Chrome-trace events, gathered in C (see _gather.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__gather(void) { return PyModule_Create(&module); }
