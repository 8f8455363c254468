/*
 * cclq.query.dagpath: the longest path of HTA's critical path graph, compiled.
 *
 *   longest_path(src, dst, weight)
 *       src, dst: int64 buffers (node ids), weight: a float64 buffer, one entry per edge
 *       in insertion order
 *       -> a list of edge positions (into the buffers) on the longest path, in path order
 *       -> None where the graph is not one this function takes (node ids below 0 or more
 *          than 4 per edge, or a repeated (src, dst) edge): the caller runs the Python
 *          implementation, which handles every graph
 *       raises ValueError on a cycle
 *
 * The same answer as cclq.query.critical_path.longest_path_columns, and so as
 * networkx.dag_longest_path (what HTA calls), ties included: nodes in networkx's
 * topological order (Kahn's algorithm by generations: the first generation in id order,
 * then each node's successors in insertion order, which a FIFO queue gives), each node's
 * best predecessor the first in insertion order among the longest, a node whose best is
 * negative restarting at 0, the path ending at the first node of greatest length.
 * Python's loop over a rank's edges was 0.45 s of a board over the shared traces (223,524
 * edges); this is a few milliseconds. The work runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { PATH_OK = 0, PATH_DECLINED = 1, PATH_CYCLE = 2, PATH_NO_MEMORY = 3 };

/* Counting sort of edge positions by key[i], stable (insertion order within a key):
 * key k's edges are order[start[k] .. start[k + 1]). fill: n slots of scratch. */
static void group_by(const int64_t *key, Py_ssize_t m, Py_ssize_t n, Py_ssize_t *start, Py_ssize_t *order,
                     Py_ssize_t *fill) {
    memset(start, 0, sizeof(Py_ssize_t) * (size_t)(n + 1));
    for (Py_ssize_t i = 0; i < m; i++) start[key[i] + 1]++;
    for (Py_ssize_t v = 0; v < n; v++) start[v + 1] += start[v];
    memcpy(fill, start, sizeof(Py_ssize_t) * (size_t)n);
    for (Py_ssize_t i = 0; i < m; i++) order[fill[key[i]]++] = i;
}

/* The path into path[] (edge positions, last edge first) and its length into *len. */
static int solve(const int64_t *src, const int64_t *dst, const double *weight, Py_ssize_t m, Py_ssize_t *path,
                 Py_ssize_t *len) {
    *len = 0;
    if (m == 0) return PATH_OK;
    int64_t hi = -1;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (src[i] < 0 || dst[i] < 0) return PATH_DECLINED;
        if (src[i] > hi) hi = src[i];
        if (dst[i] > hi) hi = dst[i];
    }
    if (hi > 4 * (int64_t)m + 16) return PATH_DECLINED; /* sparse ids: the Python step numbers them */
    Py_ssize_t n = (Py_ssize_t)hi + 1;
    int status = PATH_NO_MEMORY;
    Py_ssize_t *out_start = malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    Py_ssize_t *out_edge = malloc(sizeof(Py_ssize_t) * (size_t)m);
    Py_ssize_t *in_start = malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    Py_ssize_t *in_edge = malloc(sizeof(Py_ssize_t) * (size_t)m);
    Py_ssize_t *indegree = calloc((size_t)n, sizeof(Py_ssize_t));
    Py_ssize_t *stamp = malloc(sizeof(Py_ssize_t) * (size_t)n);
    Py_ssize_t *topo = malloc(sizeof(Py_ssize_t) * (size_t)n);
    Py_ssize_t *via = malloc(sizeof(Py_ssize_t) * (size_t)n);
    double *dist = malloc(sizeof(double) * (size_t)n);
    unsigned char *present = calloc((size_t)n, 1);
    if (!out_start || !out_edge || !in_start || !in_edge || !indegree || !stamp || !topo || !via || !dist ||
        !present)
        goto done;
    group_by(src, m, n, out_start, out_edge, stamp);
    group_by(dst, m, n, in_start, in_edge, stamp);
    /* a repeated (src, dst): declined (networkx keeps its first position and last weight) */
    for (Py_ssize_t v = 0; v < n; v++) stamp[v] = -1;
    for (Py_ssize_t v = 0; v < n; v++) {
        for (Py_ssize_t k = in_start[v]; k < in_start[v + 1]; k++) {
            int64_t u = src[in_edge[k]];
            if (stamp[u] == v) {
                status = PATH_DECLINED;
                goto done;
            }
            stamp[u] = v;
        }
    }
    Py_ssize_t n_present = 0, tail = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        present[src[i]] = 1;
        present[dst[i]] = 1;
        indegree[dst[i]]++;
    }
    for (Py_ssize_t v = 0; v < n; v++) {
        if (!present[v]) continue;
        n_present++;
        if (indegree[v] == 0) topo[tail++] = v; /* the first generation, in id order */
    }
    for (Py_ssize_t head = 0; head < tail; head++) { /* FIFO: generation by generation */
        Py_ssize_t v = topo[head];
        for (Py_ssize_t k = out_start[v]; k < out_start[v + 1]; k++) {
            int64_t child = dst[out_edge[k]];
            if (--indegree[child] == 0) topo[tail++] = child;
        }
    }
    if (tail != n_present) {
        status = PATH_CYCLE;
        goto done;
    }
    Py_ssize_t end = -1;
    for (Py_ssize_t t = 0; t < tail; t++) {
        Py_ssize_t v = topo[t];
        double best = 0.0;
        Py_ssize_t best_edge = -1;
        for (Py_ssize_t k = in_start[v]; k < in_start[v + 1]; k++) {
            Py_ssize_t i = in_edge[k];
            double length = dist[src[i]] + weight[i];
            if (best_edge < 0 || length > best) { /* the first among equally long ones */
                best = length;
                best_edge = i;
            }
        }
        if (best_edge < 0 || best < 0) {
            dist[v] = 0.0;
            via[v] = -1;
        } else {
            dist[v] = best;
            via[v] = best_edge;
        }
        if (end < 0 || dist[v] > dist[end]) end = v; /* the first of greatest length */
    }
    if (end >= 0) {
        for (Py_ssize_t i; (i = via[end]) >= 0; end = src[i]) path[(*len)++] = i;
    }
    status = PATH_OK;
done:
    free(out_start);
    free(out_edge);
    free(in_start);
    free(in_edge);
    free(indegree);
    free(stamp);
    free(topo);
    free(via);
    free(dist);
    free(present);
    return status;
}

static PyObject *longest_path(PyObject *self, PyObject *args) {
    Py_buffer s, d, w;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*", &s, &d, &w)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t m = s.len / (Py_ssize_t)sizeof(int64_t);
    Py_ssize_t *path = NULL;
    if (s.len % (Py_ssize_t)sizeof(int64_t) || d.len != s.len || w.len != m * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "src, dst and weight must hold one int64, int64 and float64 per edge");
        goto out;
    }
    path = malloc(sizeof(Py_ssize_t) * (size_t)(m > 0 ? m : 1));
    if (!path) {
        PyErr_NoMemory();
        goto out;
    }
    Py_ssize_t len = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = solve((const int64_t *)s.buf, (const int64_t *)d.buf, (const double *)w.buf, m, path, &len);
    Py_END_ALLOW_THREADS
    if (status == PATH_DECLINED) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto out;
    }
    if (status == PATH_CYCLE) {
        PyErr_SetString(PyExc_ValueError, "the critical path graph has a cycle");
        goto out;
    }
    if (status == PATH_NO_MEMORY) {
        PyErr_NoMemory();
        goto out;
    }
    result = PyList_New(len);
    if (!result) goto out;
    for (Py_ssize_t k = 0; k < len; k++) {
        PyObject *i = PyLong_FromSsize_t(path[len - 1 - k]);
        if (!i) {
            Py_CLEAR(result);
            goto out;
        }
        PyList_SET_ITEM(result, k, i);
    }
out:
    free(path);
    PyBuffer_Release(&s);
    PyBuffer_Release(&d);
    PyBuffer_Release(&w);
    return result;
}

static PyMethodDef METHODS[] = {
    {"longest_path", longest_path, METH_VARARGS,
     "longest_path(src, dst, weight) -> edge positions on the longest path, or None (see the source)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "dagpath", NULL, -1, METHODS};

PyMODINIT_FUNC PyInit_dagpath(void) { return PyModule_Create(&MODULE); }
