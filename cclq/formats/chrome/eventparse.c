/*
 * cclq.formats.chrome.eventparse: the Python face of eventparse_core.h (implemented in
 * eventparse_core.c and eventparse_json.c).
 *
 *   configure(promoted, n_columns, legacy)   once, from compiled.py: the promoted args
 *                                            (key, column, kind) and legacy categories;
 *                                            a second call is refused (parser threads
 *                                            read the configuration without a lock)
 *   parse(chunk, value_levels, max_string, max_event, base)
 *       -> (1, reason) the text ends inside an event (a wrong cut)
 *       -> (2, reason) declined: read this chunk another way
 *       -> (0, entries, rows, last_empty, base_columns, promoted_columns, drops, out_of_range)
 *
 * A column is (null_count, validity bitmap | None, values, data | None), the buffers of
 * an Arrow array, or None when every row is NULL. The parse runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "eventparse_core.h"

static Config CONFIG;
static int CONFIGURED = 0;
static locale_t C_LOCALE = (locale_t)0;

static int copy_text(PyObject *s, char *dst, size_t cap, size_t *len) {
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (!u) return -1;
    if ((size_t)n >= cap) {
        PyErr_SetString(PyExc_ValueError, "a configured name is too long");
        return -1;
    }
    memcpy(dst, u, (size_t)n);
    dst[n] = 0;
    *len = (size_t)n;
    return 0;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *promoted, *legacy;
    int n_columns;
    (void)self;
    if (CONFIGURED) { /* parser threads read CONFIG without a lock: it is written once */
        PyErr_SetString(PyExc_RuntimeError, "eventparse.configure() may be called once");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!iO!", &PyList_Type, &promoted, &n_columns, &PyList_Type, &legacy)) return NULL;
    Config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (n_columns < 0 || n_columns > MAX_PROMOTED || PyList_GET_SIZE(promoted) > MAX_KEYS ||
        PyList_GET_SIZE(legacy) > MAX_LEGACY) {
        PyErr_SetString(PyExc_ValueError, "more promoted columns, keys or legacy names than the parser holds");
        return NULL;
    }
    cfg.n_columns = n_columns;
    for (int i = 0; i < n_columns; i++) cfg.kinds[i] = -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(promoted); i++) {
        PyObject *key;
        int column, kind;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(promoted, i), "Uii", &key, &column, &kind)) return NULL;
        if (column < 0 || column >= n_columns || kind < KIND_INT || kind > KIND_INT_LIST ||
            (cfg.kinds[column] != -1 && cfg.kinds[column] != kind)) {
            PyErr_SetString(PyExc_ValueError, "a promoted key with a bad column or kind");
            return NULL;
        }
        cfg.kinds[column] = kind;
        PromotedKey *pk = &cfg.keys[cfg.n_keys++];
        if (copy_text(key, pk->key, sizeof pk->key, &pk->len)) return NULL;
        pk->column = column;
    }
    for (int i = 0; i < n_columns; i++)
        if (cfg.kinds[i] == -1) {
            PyErr_SetString(PyExc_ValueError, "a promoted column without a key");
            return NULL;
        }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(legacy); i++) {
        PyObject *old, *new_;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(legacy, i), "UU", &old, &new_)) return NULL;
        int k = cfg.n_legacy++;
        if (copy_text(old, cfg.legacy_old[k], sizeof cfg.legacy_old[k], &cfg.legacy_old_len[k]) ||
            copy_text(new_, cfg.legacy_new[k], sizeof cfg.legacy_new[k], &cfg.legacy_new_len[k]))
            return NULL;
    }
    if (C_LOCALE == (locale_t)0) {
        C_LOCALE = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        if (C_LOCALE == (locale_t)0) {
            PyErr_SetString(PyExc_OSError, "cannot create the C locale");
            return NULL;
        }
    }
    ep_config_index_keys(&cfg);
    CONFIG = cfg;
    CONFIGURED = 1;
    Py_RETURN_NONE;
}

static PyObject *bytes_of(const Buf *b) { return PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len); }

/* (null_count, validity | None, values, data | None), or None for a column of NULLs */
static PyObject *column_tuple(const Col *c) {
    if (!c->touched) Py_RETURN_NONE;
    PyObject *valid = NULL, *values = NULL, *data = NULL;
    if (c->nulls) {
        valid = bytes_of(&c->valid);
    } else {
        valid = Py_None;
        Py_INCREF(valid);
    }
    values = bytes_of(&c->values);
    if (c->type == COL_STR || c->type == COL_LIST) {
        data = bytes_of(&c->data);
    } else {
        data = Py_None;
        Py_INCREF(data);
    }
    if (!valid || !values || !data) {
        Py_XDECREF(valid);
        Py_XDECREF(values);
        Py_XDECREF(data);
        return NULL;
    }
    return Py_BuildValue("(nNNN)", (Py_ssize_t)c->nulls, valid, values, data);
}

static PyObject *drops_list(const Buf *drops) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    size_t at = 0;
    while (at + 8 <= drops->len) {
        int32_t head[2];
        memcpy(head, drops->data + at, 8);
        at += 8;
        PyObject *ph = PyUnicode_DecodeUTF8(drops->data + at, head[1], "strict");
        at += (size_t)head[1];
        PyObject *item = ph ? Py_BuildValue("(iN)", head[0], ph) : NULL;
        if (!item || PyList_Append(out, item)) {
            Py_XDECREF(item);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(item);
    }
    return out;
}

static PyObject *result_of(Parser *P) {
    PyObject *base = PyTuple_New(N_BASE), *promoted = NULL, *drops = NULL, *ranges = NULL;
    if (!base) return NULL;
    for (int i = 0; i < N_BASE; i++) {
        PyObject *c = column_tuple(&P->base_cols[i]);
        if (!c) goto fail;
        PyTuple_SET_ITEM(base, i, c);
    }
    promoted = PyTuple_New(P->cfg->n_columns);
    ranges = PyTuple_New(P->cfg->n_columns);
    if (!promoted || !ranges) goto fail;
    for (int i = 0; i < P->cfg->n_columns; i++) {
        PyObject *c = column_tuple(&P->promoted[i]);
        if (!c) goto fail;
        PyTuple_SET_ITEM(promoted, i, c);
        PyObject *k = PyLong_FromLongLong(P->out_of_range[i]);
        if (!k) goto fail;
        PyTuple_SET_ITEM(ranges, i, k);
    }
    drops = drops_list(&P->drops);
    if (!drops) goto fail;
    return Py_BuildValue("(innLNNNN)", EP_OK, (Py_ssize_t)P->entries, (Py_ssize_t)P->rows, (long long)P->last_empty,
                         base, promoted, drops, ranges);
fail:
    Py_XDECREF(base);
    Py_XDECREF(promoted);
    Py_XDECREF(drops);
    Py_XDECREF(ranges);
    return NULL;
}

static PyObject *parse(PyObject *self, PyObject *args) {
    Py_buffer chunk;
    int value_levels;
    Py_ssize_t max_string, max_event;
    long long base;
    (void)self;
    if (!CONFIGURED) {
        PyErr_SetString(PyExc_RuntimeError, "eventparse.configure() was not called");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*innL", &chunk, &value_levels, &max_string, &max_event, &base)) return NULL;
    Parser *P = (Parser *)malloc(sizeof(Parser));
    if (!P) {
        PyBuffer_Release(&chunk);
        return PyErr_NoMemory();
    }
    ep_parser_init(P, &CONFIG, (const char *)chunk.buf, (size_t)chunk.len);
    P->value_levels = value_levels;
    P->max_string = max_string > 0 ? (size_t)max_string : 0;
    P->max_event = max_event > 0 ? (size_t)max_event : 0;
    P->base = (int64_t)base;
    P->c_locale = C_LOCALE;
    Py_BEGIN_ALLOW_THREADS
    ep_parse_chunk(P);
    Py_END_ALLOW_THREADS
    PyObject *out;
    if (P->status == EP_NOMEM) {
        out = PyErr_NoMemory();
    } else if (P->status != EP_OK) {
        out = Py_BuildValue("(is)", P->status, P->why ? P->why : "");
    } else {
        out = result_of(P);
    }
    ep_parser_free(P);
    free(P);
    PyBuffer_Release(&chunk);
    return out;
}

static PyMethodDef METHODS[] = {
    {"configure", configure, METH_VARARGS, "Sets the promoted args and legacy categories the parser fills."},
    {"parse", parse, METH_VARARGS, "Parses one chunk of events into Arrow column buffers (see the module's C source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "eventparse", "The compiled chunk parser of the fast Chrome-JSON reader.", -1, METHODS,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_eventparse(void) { return PyModule_Create(&MODULE); }
