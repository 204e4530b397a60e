/* workspacetrack._fastwalk: the stat walk's listing loop, in C and on several threads.
 *
 * A stat walk of a 100,000-file workspace is a readdir and an lstat per entry; in Python each
 * entry also costs a DirEntry, an os.stat_result and a key tuple, which together cost more than
 * the system calls, and the calls run one at a time (issue 13: an unchanged in-place walk has to
 * stay near `git status`, which stats on several threads). Here a batch of directories is listed
 * and stat'ed by worker threads that make only system calls; the results come back as one packed
 * bytes object per directory, read with the GIL held by:
 *
 *   list_dirs(paths, store_dev, store_ino, threads) -> list[bytes | None]
 *       None where the directory could not be opened or read; b"" for an empty directory. The
 *       store's own directory (dev, ino) is marked so that the readers below leave it out.
 *   same_packed(listing, names, others, root, rule_files) -> list[str] | None
 *       The names of the subdirectories to walk when the directory is unchanged against its
 *       record: every entry named in ``names`` (name -> cache row) has a trusted row whose stat
 *       key equals its lstat, no recorded name is gone, no other entry is a file the rules did
 *       not exclude (``others``) and none is named in ``rule_files``; ``.git`` directories are
 *       left out and the root's ``.git`` file is skipped. None otherwise.
 *   unpack(listing) -> list[tuple[str, StatKey | None]] | None
 *       Every entry with its stat key (size, mtime_ns, ctime_ns, ino, mode), None for one that
 *       vanished before its lstat, the store's directory left out; None when a value does not
 *       fit 64 bits.
 *
 * And, each documented where it is defined: fresh_dir (a directory examined in full), index_entries
 * (the loop over git's index entries, as a dict or as a C table that fresh_dir and index_row look
 * paths up in by their bytes; 100,000 entries in Python cost ~100 ms of a cold capture),
 * rows_and_parts and sorted_json (a manifest's rows, its entries sorted, and their JSON exactly as
 * pydantic writes it: the sort and the JSON on a thread of their own), pick_entries (the entries
 * of a few paths out of a stored manifest's JSON: a rewind plans from its scope, not the tree).
 *
 * Every decision (ignore rules, hashing, git's index, records) stays in workspacetrack/walk.py,
 * which also holds the pure-Python twin of each function, used when this module is not built.
 * A None is never wrong, only slower: the caller then lists the directory in Python, which meets
 * every out-of-the-ordinary case (and raises the OSError an unreadable directory deserves).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/* nanoseconds since the epoch of a timespec, as os.stat_result computes them; 0 on overflow
 * (the caller then gives up on the directory) */
static int ts_ns(const struct timespec *ts, long long *out) {
    long long ns;
    if (__builtin_mul_overflow((long long)ts->tv_sec, 1000000000LL, &ns)) return 0;
    if (__builtin_add_overflow(ns, (long long)ts->tv_nsec, out)) return 0;
    return 1;
}

/* Tuples made here hold only ints, strings, bools, None or other such tuples: no cycle can pass
 * through them, which the cyclic collector would find out itself on its next pass (and untrack
 * them) - after traversing each of them once. A cold capture of 100,000 files makes some 300,000
 * of them, ~100 ms of that pass; untracked now, it never has to. */
static PyObject *atoms(PyObject *t) {
    if (t != NULL) PyObject_GC_UnTrack(t);
    return t;
}

static int is_dot(const char *n) {
    return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

/* 1: item equals the long long v; 0: it does not (or is not an int that fits) */
static int eq_ll(PyObject *item, long long v) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return !overflow && x == v;
}

static int eq_ull(PyObject *item, unsigned long long v) {
    unsigned long long x = PyLong_AsUnsignedLongLong(item);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return x == v;
}

/* pthread_create for a thread that touches no Python object: it starts with every signal
 * blocked, so Python's handling stays on the main thread. 1: started. */
static int start_quiet(pthread_t *tid, void *(*fn)(void *), void *arg) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int ok = pthread_create(tid, NULL, fn, arg) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return ok;
}

static int is_store(const struct stat *st, long long store_dev, long long store_ino) {
    return store_ino >= 0 && (long long)st->st_dev == store_dev && (long long)st->st_ino == store_ino;
}
/* A growable byte buffer (a listing, an index table's names, a manifest's JSON), doubling. */
typedef struct {
    char *b;
    size_t len, cap;
} buf_t;

static int buf_room(buf_t *b, size_t extra) {
    if (b->len + extra <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *nb = realloc(b->b, cap);
    if (nb == NULL) return 0;
    b->b = nb;
    b->cap = cap;
    return 1;
}

static int buf_put(buf_t *b, const char *s, size_t n) {
    if (!buf_room(b, n)) return 0;
    memcpy(b->b + b->len, s, n);
    b->len += n;
    return 1;
}

/* ---- listing many directories at once, on several threads ---------------------------------
 * list_dirs(paths, store_dev, store_ino, threads) -> list[bytes | None]: each directory's entries
 * packed as records (below), None where the directory cannot be opened or read. The threads make
 * only system calls (no Python object is touched without the GIL, and they take no signal: the
 * main thread keeps Python's handling); the records are then read by same_packed / unpack with
 * the GIL held. */

typedef struct {
    int64_t size, mtime, ctime;
    uint64_t ino;
    uint32_t mode;
    uint16_t namelen;
    uint8_t state;  /* 0: stat ok, 1: vanished before its lstat, 2: a value does not fit,
                       3: the store's own directory (never listed, but the parent is not empty) */
    uint8_t pad;
} rec_t;  /* followed by namelen bytes of name, then padding to 8 */

#define REC_ALIGN(n) (((n) + 7) & ~(size_t)7)

typedef struct {
    char *path;
    buf_t out;  /* the packed records */
    int failed;
} job_t;

typedef struct {
    job_t *jobs;
    Py_ssize_t n;
    Py_ssize_t next;  /* taken under the lock */
    pthread_mutex_t lock;
    long long store_dev, store_ino;
} work_t;

static int job_put(job_t *j, const rec_t *r, const char *name) {
    size_t need = REC_ALIGN(sizeof(rec_t) + r->namelen);
    if (!buf_room(&j->out, need)) return 0;
    char *at = j->out.b + j->out.len;
    memcpy(at, r, sizeof(rec_t));
    memcpy(at + sizeof(rec_t), name, r->namelen);
    memset(at + sizeof(rec_t) + r->namelen, 0, need - sizeof(rec_t) - r->namelen);
    j->out.len += need;
    return 1;
}

static void list_one(job_t *j, long long store_dev, long long store_ino) {
    int fd = open(j->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        j->failed = 1;
        return;
    }
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        j->failed = 1;
        return;
    }
    struct dirent *e;
    for (;;) {
        errno = 0;
        e = readdir(d);
        if (e == NULL) {
            if (errno) j->failed = 1;
            break;
        }
        if (is_dot(e->d_name)) continue;
        size_t nl = strlen(e->d_name);
        if (nl > 0xFFFF) {
            j->failed = 1;
            break;
        }
        rec_t r;
        memset(&r, 0, sizeof r);
        r.namelen = (uint16_t)nl;
        struct stat st;
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            r.state = 1;
        } else {
            long long m, c;
            if (S_ISDIR(st.st_mode) && is_store(&st, store_dev, store_ino)) {
                r.state = 3;
            } else if (!ts_ns(&st.st_mtim, &m) || !ts_ns(&st.st_ctim, &c)) {
                r.state = 2;
            } else {
                r.size = st.st_size;
                r.mtime = m;
                r.ctime = c;
                r.ino = st.st_ino;
                r.mode = st.st_mode;
            }
        }
        if (!job_put(j, &r, e->d_name)) {
            j->failed = 1;
            break;
        }
    }
    closedir(d);
}

static void *worker(void *arg) {
    work_t *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        Py_ssize_t i = w->next++;
        pthread_mutex_unlock(&w->lock);
        if (i >= w->n) return NULL;
        list_one(&w->jobs[i], w->store_dev, w->store_ino);
    }
}

static PyObject *list_dirs(PyObject *self, PyObject *args) {
    PyObject *paths;
    long long store_dev, store_ino;
    int threads;
    if (!PyArg_ParseTuple(args, "O!LLi", &PyList_Type, &paths, &store_dev, &store_ino, &threads)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(paths);
    job_t *jobs = calloc(n ? n : 1, sizeof(job_t));
    if (jobs == NULL) return PyErr_NoMemory();
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = NULL;
        if (!PyUnicode_FSConverter(PyList_GET_ITEM(paths, i), &b)) goto done;
        jobs[i].path = strdup(PyBytes_AS_STRING(b));
        Py_DECREF(b);
        if (jobs[i].path == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    work_t w = {jobs, n, 0, PTHREAD_MUTEX_INITIALIZER, store_dev, store_ino};
    if (threads < 1) threads = 1;
    if (threads > 16) threads = 16;
    if (threads > n) threads = (int)(n ? n : 1);
    Py_BEGIN_ALLOW_THREADS
    pthread_t tids[16];
    int started = 0;
    for (int t = 1; t < threads; t++) started += start_quiet(&tids[started], worker, &w);
    worker(&w);  /* this thread works too; with no thread started it does it all */
    for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
    Py_END_ALLOW_THREADS
    out = PyList_New(n);
    if (out == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item;
        if (jobs[i].failed) {
            item = Py_NewRef(Py_None);
        } else {
            item = PyBytes_FromStringAndSize(jobs[i].out.b ? jobs[i].out.b : "", (Py_ssize_t)jobs[i].out.len);
            if (item == NULL) {
                Py_CLEAR(out);
                goto done;
            }
        }
        PyList_SET_ITEM(out, i, item);
    }
done:
    for (Py_ssize_t i = 0; i < n; i++) {
        free(jobs[i].path);
        free(jobs[i].out.b);
    }
    free(jobs);
    return out;
}

/* The stat key (size, mtime_ns, ctime_ns, ino, mode) of a record, as walk.py makes it: built
 * directly (Py_BuildValue parses its format for each of 100,000 files), untracked by the GC. */
/* the int of a file mode: a tree has a handful of them, so each is made once and shared (ints
 * are immutable; 100,000 files would otherwise make 100,000 ints of the same value) */
static PyObject *mode_int(uint32_t mode) {
    static uint32_t modes[4];
    static PyObject *ints[4];
    static int next;
    for (int i = 0; i < 4; i++) {
        if (ints[i] != NULL && modes[i] == mode) return Py_NewRef(ints[i]);
    }
    PyObject *o = PyLong_FromLong((long)mode);
    if (o == NULL) return NULL;
    Py_XSETREF(ints[next], Py_NewRef(o));
    modes[next] = mode;
    next = (next + 1) % 4;
    return o;
}

static PyObject *stat_key(const rec_t *r) {
    PyObject *t = PyTuple_New(5);
    if (t == NULL) return NULL;
    PyObject *mtime = PyLong_FromLongLong(r->mtime);
    /* a file written once has ctime == mtime: one int for both */
    PyObject *ctime = r->ctime == r->mtime ? Py_XNewRef(mtime) : PyLong_FromLongLong(r->ctime);
    PyObject *v[5] = {PyLong_FromLongLong(r->size), mtime, ctime, PyLong_FromUnsignedLongLong(r->ino),
                      mode_int(r->mode)};
    for (int i = 0; i < 5; i++) {
        if (v[i] == NULL) {
            for (int k = 0; k < 5; k++) Py_XDECREF(v[k]);
            Py_DECREF(t);
            return NULL;
        }
    }
    for (int i = 0; i < 5; i++) PyTuple_SET_ITEM(t, i, v[i]);
    return atoms(t);
}

/* walks the records of a packed listing: 1 with *r and *name set, 0 at the end */
static int next_rec(const char *buf, size_t len, size_t *pos, rec_t *r, const char **name) {
    if (*pos + sizeof(rec_t) > len) return 0;
    memcpy(r, buf + *pos, sizeof(rec_t));
    if (*pos + sizeof(rec_t) + r->namelen > len) return 0;  /* not a listing of ours */
    *name = buf + *pos + sizeof(rec_t);
    *pos += REC_ALIGN(sizeof(rec_t) + r->namelen);
    return 1;
}

static int key_matches(PyObject *row, const rec_t *r) {
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < 3) return 0;
    PyObject *key = PyTuple_GET_ITEM(row, 0);
    PyObject *trusted = PyTuple_GET_ITEM(row, 2);
    if (trusted != Py_True) {
        int t = PyObject_IsTrue(trusted);
        if (t < 0) PyErr_Clear();
        if (t != 1) return 0;
    }
    if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != 5) return 0;
    return eq_ll(PyTuple_GET_ITEM(key, 0), r->size) && eq_ll(PyTuple_GET_ITEM(key, 1), r->mtime)
        && eq_ll(PyTuple_GET_ITEM(key, 2), r->ctime) && eq_ull(PyTuple_GET_ITEM(key, 3), r->ino)
        && eq_ll(PyTuple_GET_ITEM(key, 4), (long long)r->mode);
}

/* same_packed(listing, names, others, root, rule_files) -> list[str] | None: same_dir on a
 * listing made by list_dirs */
static PyObject *same_packed(PyObject *self, PyObject *args) {
    const char *buf;
    Py_ssize_t len;
    PyObject *names, *others, *rule_files;
    int root;
    if (!PyArg_ParseTuple(args, "y#O!OpO", &buf, &len, &PyDict_Type, &names, &others, &root, &rule_files))
        return NULL;
    if (!PyAnySet_Check(others) || !PyAnySet_Check(rule_files)) {
        PyErr_SetString(PyExc_TypeError, "others and rule_files must be sets");
        return NULL;
    }
    PyObject *subdirs = PyList_New(0);
    if (subdirs == NULL) return NULL;
    Py_ssize_t hits = 0;
    size_t pos = 0;
    rec_t r;
    const char *cname;
    while (next_rec(buf, (size_t)len, &pos, &r, &cname)) {
        if (r.state == 3) continue;  /* the store: not walked, not a file */
        if (r.state != 0) goto fallback;
        PyObject *name = PyUnicode_DecodeFSDefaultAndSize(cname, r.namelen);
        if (name == NULL) goto error;
        int in = PySet_Contains(rule_files, name);
        if (in != 0) {
            Py_DECREF(name);
            if (in < 0) goto error;
            goto fallback;
        }
        PyObject *row = PyDict_GetItemWithError(names, name);
        if (row != NULL) {
            Py_DECREF(name);
            if (!key_matches(row, &r)) goto fallback;
            hits++;
            continue;
        }
        if (PyErr_Occurred()) {
            Py_DECREF(name);
            goto error;
        }
        int is_git = r.namelen == 4 && memcmp(cname, ".git", 4) == 0;
        if (S_ISDIR(r.mode)) {
            if (!is_git && PyList_Append(subdirs, name) < 0) {
                Py_DECREF(name);
                goto error;
            }
            Py_DECREF(name);
            continue;
        }
        if (root && is_git) {
            Py_DECREF(name);
            continue;
        }
        in = PySet_Contains(others, name);
        Py_DECREF(name);
        if (in < 0) goto error;
        if (in == 0) goto fallback;
    }
    if (hits != PyDict_GET_SIZE(names)) goto fallback;
    return subdirs;
fallback:
    Py_DECREF(subdirs);
    Py_RETURN_NONE;
error:
    Py_DECREF(subdirs);
    return NULL;
}

/* unpack(listing) -> list[tuple[str, StatKey | None]] | None (None: a value did not fit) */
static PyObject *unpack(PyObject *self, PyObject *args) {
    const char *buf;
    Py_ssize_t len;
    if (!PyArg_ParseTuple(args, "y#", &buf, &len)) return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    size_t pos = 0;
    rec_t r;
    const char *cname;
    while (next_rec(buf, (size_t)len, &pos, &r, &cname)) {
        if (r.state == 2) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyObject *item;
        if (r.state == 3) continue;  /* the store: left out (the caller sees the listing was not empty) */
        if (r.state == 1)
            item = atoms(Py_BuildValue("(N O)", PyUnicode_DecodeFSDefaultAndSize(cname, r.namelen), Py_None));
        else
        {
            PyObject *key = stat_key(&r);
            item = key == NULL ? NULL : atoms(Py_BuildValue("(N N)",
                                                            PyUnicode_DecodeFSDefaultAndSize(cname, r.namelen), key));
        }
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(item);
    }
    return out;
}

/* ---- git's index as a table ------------------------------------------------------------------
 * The rows index_entries (below) reads, held in C rather than as 100,000 Python tuples: a file
 * whose stat matches its entry is looked up by the bytes of its path (the listing's own name
 * bytes after the directory's), with no Python string, tuple or int made for an entry the walk
 * does not take. A PyCapsule named IXTAB_NAME owns it. */

#define IXTAB_NAME "workspacetrack._fastwalk.index"

typedef struct {
    long long mtime, ctime;
    uint32_t size32, ino32;
    uint32_t name_off, name_len;
    unsigned char oid[20];
} ixent_t;

typedef struct {
    ixent_t *ents;
    size_t n, cap;
    buf_t names;      /* every path's bytes, one after the other */
    uint32_t *slots;  /* open addressing: index + 1 into ents, 0 empty */
    size_t mask;
} ixtab_t;

static uint64_t fnv1a(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static void ixtab_free(ixtab_t *t) {
    if (t == NULL) return;
    free(t->ents);
    free(t->names.b);
    free(t->slots);
    free(t);
}

static void ixtab_capsule_free(PyObject *cap) {
    ixtab_free(PyCapsule_GetPointer(cap, IXTAB_NAME));
}

/* the slot holding path (p, n), or the empty slot where it would go */
static uint32_t *ixtab_slot(const ixtab_t *t, const char *p, size_t n) {
    size_t i = (size_t)fnv1a(p, n) & t->mask;
    for (;;) {
        uint32_t *s = &t->slots[i];
        if (*s == 0) return s;
        const ixent_t *e = &t->ents[*s - 1];
        if (e->name_len == n && memcmp(t->names.b + e->name_off, p, n) == 0) return s;
        i = (i + 1) & t->mask;
    }
}

static const ixent_t *ixtab_find(const ixtab_t *t, const char *p, size_t n) {
    if (t->slots == NULL) return NULL;
    uint32_t *s = ixtab_slot(t, p, n);
    return *s ? &t->ents[*s - 1] : NULL;
}

/* 1: appended (its slot is set by ixtab_index once every entry is in); 0: no memory */
static int ixtab_add(ixtab_t *t, const char *name, size_t nlen, uint32_t size, long long mtime, long long ctime,
                     uint32_t ino, const unsigned char *oid) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        ixent_t *e = realloc(t->ents, cap * sizeof(ixent_t));
        if (e == NULL) return 0;
        t->ents = e;
        t->cap = cap;
    }
    if (t->n >= 0xFFFFFFF0u || t->names.len + nlen > 0xFFFFFFFFu) return 0;
    size_t off = t->names.len;
    if (!buf_put(&t->names, name, nlen)) return 0;
    ixent_t *e = &t->ents[t->n++];
    e->name_off = (uint32_t)off;
    e->name_len = (uint32_t)nlen;
    e->size32 = size;
    e->ino32 = ino;
    e->mtime = mtime;
    e->ctime = ctime;
    memcpy(e->oid, oid, 20);
    return 1;
}

/* the hash slots, once every entry is in; a path met twice keeps its later entry, as a dict
 * assignment would. 0: no memory */
static int ixtab_index(ixtab_t *t) {
    size_t size = 1024;
    while (size < t->n * 2) size *= 2;
    t->slots = calloc(size, sizeof(uint32_t));
    if (t->slots == NULL) return 0;
    t->mask = size - 1;
    for (size_t k = 0; k < t->n; k++) {
        uint32_t *s = ixtab_slot(t, t->names.b + t->ents[k].name_off, t->ents[k].name_len);
        *s = (uint32_t)(k + 1);
    }
    return 1;
}

static ixtab_t *ixtab_of(PyObject *cap) {
    return PyCapsule_CheckExact(cap) ? PyCapsule_GetPointer(cap, IXTAB_NAME) : NULL;
}

/* the table an argument holds, or NULL with a TypeError set */
static ixtab_t *table_arg(PyObject *cap) {
    ixtab_t *tab = ixtab_of(cap);
    if (tab == NULL) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "not index_entries' table");
    }
    return tab;
}

/* the 40 lowercase hex digits of a 20-byte object id, as git writes them */
static void hex_into(Py_UCS1 out[40], const unsigned char *oid) {
    static const char hexd[] = "0123456789abcdef";
    for (int k = 0; k < 20; k++) {
        out[2 * k] = (Py_UCS1)hexd[oid[k] >> 4];
        out[2 * k + 1] = (Py_UCS1)hexd[oid[k] & 15];
    }
}

static PyObject *hex_of(const unsigned char *oid) {
    PyObject *s = PyUnicode_New(40, 127);
    if (s != NULL) hex_into(PyUnicode_1BYTE_DATA(s), oid);
    return s;
}

/* walk.index_row's rule: the row an entry vouches for a regular file whose lstat is (size, mtime,
 * ctime, ino) - the entry's stat, size and inode truncated to 32 bits as git keeps them - with
 * ``key`` as its stat key; NULL with no error when it does not vouch */
static int ixent_matches(const ixent_t *e, long long size, long long mtime, long long ctime, unsigned long long ino) {
    return e != NULL && e->mtime == mtime && e->ctime == ctime && e->size32 == (uint32_t)((uint64_t)size & 0xFFFFFFFFu)
        && e->ino32 == (uint32_t)(ino & 0xFFFFFFFFu);
}

static PyObject *ixent_row(const ixent_t *e, PyObject *key, long long size, long long mtime, long long ctime,
                           unsigned long long ino, long long threshold) {
    if (!ixent_matches(e, size, mtime, ctime, ino)) return NULL;
    PyObject *hex = hex_of(e->oid);
    if (hex == NULL) return NULL;
    long long newest = mtime > ctime ? mtime : ctime;
    PyObject *row = atoms(PyTuple_Pack(4, key, hex, newest < threshold ? Py_True : Py_False, Py_None));
    Py_DECREF(hex);
    return row;
}

/* ---- a directory examined in full --------------------------------------------------------
 * fresh_dir(listing, prefix, prefix_bytes, root, old_rows, index, threshold, size_cap, known, match,
 *           ignores, rule_files) -> (mine, others, exact, subdirs, todo, hits, taken) | None
 * The per-entry loop of walk.Scan._list_dir (its Python twin, which documents the rules), for a
 * directory under at most one ignore level whose patterns look at names only: ``match`` is that
 * level's compiled pattern's match (None: no rules), ``ignores`` its group -> verdict table,
 * ``known`` its name -> verdict cache (filled here as in Python). Rows come from a trusted old row
 * with the same stat key, else from git's ``index`` table (index_entries's, looked up by
 * ``prefix_bytes`` + the name's bytes; None: not read yet); every other file is left in ``todo``
 * as (name, key) for the caller to read. None when a value does not fit or an entry is named in
 * ``rule_files`` (the caller lists the directory in Python). */

static PyObject *fresh_dir(PyObject *self, PyObject *args) {
    const char *buf;
    Py_ssize_t len;
    const char *pre_b;
    Py_ssize_t pre_len;
    PyObject *prefix, *old_rows, *index, *known, *match, *ignores, *rule_files;
    int root;
    long long threshold, size_cap;
    if (!PyArg_ParseTuple(args, "y#Uy#pO!OLLO!OO!O", &buf, &len, &prefix, &pre_b, &pre_len, &root, &PyDict_Type,
                          &old_rows, &index, &threshold, &size_cap, &PyDict_Type, &known, &match, &PyDict_Type,
                          &ignores, &rule_files))
        return NULL;
    if (!PyAnySet_Check(rule_files)) {
        PyErr_SetString(PyExc_TypeError, "rule_files must be a set");
        return NULL;
    }
    ixtab_t *tab = NULL;
    if (index != Py_None && (tab = table_arg(index)) == NULL) return NULL;
    /* the path's bytes, for the table: the directory's, then each name's (at most 0xFFFF) */
    char *kb = malloc((size_t)pre_len + 0x10000);
    if (kb == NULL) return PyErr_NoMemory();
    memcpy(kb, pre_b, (size_t)pre_len);
    int with_old = PyDict_GET_SIZE(old_rows) > 0;  /* a cold walk looks no row up: no path string */
    PyObject *mine = PyDict_New(), *others = PyList_New(0), *subdirs = PyList_New(0), *todo = PyList_New(0);
    PyObject *result = NULL;
    Py_ssize_t hits = 0, taken = 0;
    int exact = 1;
    if (mine == NULL || others == NULL || subdirs == NULL || todo == NULL) goto done;
    size_t pos = 0;
    rec_t r;
    const char *cname;
    while (next_rec(buf, (size_t)len, &pos, &r, &cname)) {
        if (r.state == 3) continue;
        if (r.state == 1) {
            exact = 0;  /* vanished between listing and stat */
            continue;
        }
        if (r.state != 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        int is_dir = S_ISDIR(r.mode);
        if (r.namelen == 4 && memcmp(cname, ".git", 4) == 0 && (root || is_dir)) continue;
        PyObject *name = PyUnicode_DecodeFSDefaultAndSize(cname, r.namelen);
        if (name == NULL) goto done;
        int rf = PySet_GET_SIZE(rule_files) ? PySet_Contains(rule_files, name) : 0;
        if (rf != 0) {  /* a rule file adds a level here: the Python listing works it out */
            Py_DECREF(name);
            if (rf > 0) result = Py_NewRef(Py_None);
            goto done;
        }
        if (is_dir) {
            int a = PyList_Append(subdirs, name);
            Py_DECREF(name);
            if (a < 0) goto done;
            continue;
        }
        if (match != Py_None) {
            PyObject *ig = PyDict_GetItemWithError(known, name);  /* borrowed */
            if (ig == NULL) {
                if (PyErr_Occurred()) goto fail_name;
                PyObject *m = PyObject_CallOneArg(match, name);
                if (m == NULL) goto fail_name;
                if (m == Py_None) {
                    ig = Py_False;
                } else {
                    PyObject *group = PyObject_GetAttrString(m, "lastgroup");
                    if (group == NULL) {
                        Py_DECREF(m);
                        goto fail_name;
                    }
                    PyObject *gkey = group == Py_None ? PyUnicode_FromString("") : Py_NewRef(group);
                    Py_DECREF(group);
                    if (gkey == NULL) {
                        Py_DECREF(m);
                        goto fail_name;
                    }
                    ig = PyDict_GetItemWithError(ignores, gkey);
                    if (ig == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, gkey);
                    Py_DECREF(gkey);
                    if (ig == NULL) {
                        Py_DECREF(m);
                        goto fail_name;
                    }
                }
                Py_DECREF(m);
                int t = PyObject_IsTrue(ig);
                if (t < 0) goto fail_name;
                ig = t ? Py_True : Py_False;
                if (PyDict_SetItem(known, name, ig) < 0) goto fail_name;
            }
            int t = PyObject_IsTrue(ig);
            if (t < 0) goto fail_name;
            if (t) {
                int a = PyList_Append(others, name);
                Py_DECREF(name);
                if (a < 0) goto done;
                continue;
            }
        }
        PyObject *key = stat_key(&r);
        if (key == NULL) goto fail_name;
        PyObject *rel = with_old ? PyUnicode_Concat(prefix, name) : NULL;
        if (with_old && rel == NULL) {
            Py_DECREF(key);
            goto fail_name;
        }
        PyObject *row = with_old ? PyDict_GetItemWithError(old_rows, rel) : NULL;  /* borrowed */
        PyObject *made = NULL;
        if (row != NULL) {
            int trusted = PyTuple_Check(row) && PyTuple_GET_SIZE(row) >= 3 ? PyObject_IsTrue(PyTuple_GET_ITEM(row, 2)) : 0;
            if (trusted < 0) goto fail_key;
            if (trusted) {
                int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(row, 0), key, Py_EQ);
                if (eq < 0) goto fail_key;
                if (eq) {
                    hits++;
                    made = Py_NewRef(row);
                }
            }
        } else if (PyErr_Occurred()) {
            goto fail_key;
        }
        if (made == NULL && tab != NULL && S_ISREG(r.mode) && r.size <= size_cap) {
            memcpy(kb + pre_len, cname, r.namelen);
            const ixent_t *e = ixtab_find(tab, kb, (size_t)pre_len + r.namelen);
            made = ixent_row(e, key, r.size, r.mtime, r.ctime, r.ino, threshold);
            if (made == NULL && PyErr_Occurred()) goto fail_key;
            if (made != NULL) taken++;
        }
        if (made != NULL) {
            int a = PyDict_SetItem(mine, name, made);
            Py_DECREF(made);
            if (a < 0) goto fail_key;
        } else {
            PyObject *item = atoms(PyTuple_Pack(2, name, key));
            if (item == NULL || PyList_Append(todo, item) < 0) {
                Py_XDECREF(item);
                goto fail_key;
            }
            Py_DECREF(item);
        }
        Py_XDECREF(rel);
        Py_DECREF(key);
        Py_DECREF(name);
        continue;
    fail_key:
        Py_XDECREF(rel);
        Py_DECREF(key);
    fail_name:
        Py_DECREF(name);
        goto done;
    }
    result = Py_BuildValue("(OOOOOnn)", mine, others, exact ? Py_True : Py_False, subdirs, todo, hits, taken);
done:
    free(kb);
    Py_XDECREF(mine);
    Py_XDECREF(others);
    Py_XDECREF(subdirs);
    Py_XDECREF(todo);
    return result;
}

/* ---- a manifest's dictionaries, sorted and in JSON -------------------------------------------
 * sorted_json(d, entries) -> JSON bytes | None
 * What TrackStore stores of a manifest's ``entries`` ({path: (id, mode, size, target | None)},
 * ``entries`` true) or ``skipped`` ({path: reason}): the JSON object of the dict in key order
 * (Python's order of str, which is the byte order of their UTF-8) exactly as pydantic writes it
 * (no spaces; '"', '\\' and control characters escaped as serde_json does, everything else as
 * UTF-8). None when something does not fit that shape: a key or value that is not UTF-8 text (a
 * lone surrogate: the caller writes wire forms), a value of another type, an int beyond 64 bits.
 * Sorting 100,000 paths and dumping them through pydantic cost ~70 ms of a cold capture. */

typedef struct {
    uint64_t head[2];  /* the first 16 bytes of the key, big-endian, zero-padded: most compares end here */
    const char *u8;    /* the key's UTF-8 (the str object's own buffer: valid while it lives) */
    Py_ssize_t n;
    PyObject *key;
    /* the value, read beforehand so that the JSON is written without the GIL: an entry's id,
     * mode, size and link target (t NULL: none), or a skip's reason in h */
    const char *h, *t;
    Py_ssize_t hn, tn;
    long long mode, size;
} item_t;

static void set_head(item_t *it) {
    unsigned char pad[16] = {0};
    memcpy(pad, it->u8, (size_t)(it->n < 16 ? it->n : 16));
    for (int w = 0; w < 2; w++) {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++) v = (v << 8) | pad[w * 8 + i];
        it->head[w] = v;
    }
}

static int cmp_items(const void *a, const void *b) {
    const item_t *x = a, *y = b;
    if (x->head[0] != y->head[0]) return x->head[0] < y->head[0] ? -1 : 1;
    if (x->head[1] != y->head[1]) return x->head[1] < y->head[1] ? -1 : 1;
    /* equal heads (or a key shorter than 16 bytes, zero-padded): the bytes, then the lengths */
    int c = memcmp(x->u8, y->u8, (size_t)(x->n < y->n ? x->n : y->n));
    if (c != 0) return c;
    return (x->n > y->n) - (x->n < y->n);
}

/* whether any of the 8 bytes of x needs escaping in JSON: below 0x20, '"' or '\\' (the classic
 * "has a zero byte" bit trick, on x and on x with each of the two characters xored away) */
static int needs_escape8(uint64_t x) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t q = x ^ (ones * '"'), bs = x ^ (ones * '\\');
    return (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & highs ? 1 : 0;
}

/* a JSON string: at most 6 bytes out per byte in */
static int buf_jstr(buf_t *b, const char *s, Py_ssize_t n) {
    static const char hex[] = "0123456789abcdef";
    if (!buf_room(b, (size_t)n * 6 + 2)) return 0;
    char *o = b->b + b->len;
    *o++ = '"';
    Py_ssize_t i = 0;
    /* 8 bytes at a time while none needs escaping (paths and ids: nearly always) */
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        if (needs_escape8(x)) break;
        memcpy(o, s + i, 8);
        o += 8;
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o++ = '"';
    b->len = (size_t)(o - b->b);
    return 1;
}

static int buf_ll(buf_t *b, long long x) {
    char tmp[24];  /* the decimal digits, written backwards (snprintf costs ~20 ms per 200,000) */
    int k = 24;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    do {
        tmp[--k] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0) tmp[--k] = '-';
    return buf_put(b, tmp + k, (size_t)(24 - k));
}

/* the UTF-8 of str s (its own buffer), or NULL with no error when s is not UTF-8 text */
static const char *utf8_of(PyObject *s, Py_ssize_t *n) {
    if (!PyUnicode_Check(s)) return NULL;
    const char *u = PyUnicode_AsUTF8AndSize(s, n);
    if (u == NULL) PyErr_Clear();
    return u;
}

static int ll_of(PyObject *v, long long *out) {
    if (!PyLong_CheckExact(v)) return 0;  /* (a bool is not an int here: pydantic would write true) */
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* With the GIL: the key of it (it->key) and its value ``v`` read into it, for the writer below:
 * an entry (id, mode, size, target | None), a tuple or a list (``entries``), or a reason str.
 * 0 when they do not fit that shape (no error set). */
/* With the GIL: it->key and an entry's four fields ``f`` (id, mode, size, target | None) read
 * into it; 0 when they do not fit (no error set) */
static int prep_entry(item_t *it, PyObject *const *f) {
    if ((it->u8 = utf8_of(it->key, &it->n)) == NULL) return 0;
    set_head(it);
    if ((it->h = utf8_of(f[0], &it->hn)) == NULL || !ll_of(f[1], &it->mode) || !ll_of(f[2], &it->size)) return 0;
    it->t = NULL;
    return f[3] == Py_None || (it->t = utf8_of(f[3], &it->tn)) != NULL;
}

static int prep_item(item_t *it, PyObject *v, int entries) {
    if (entries) {
        if (PyTuple_Check(v) && PyTuple_GET_SIZE(v) == 4) return prep_entry(it, &PyTuple_GET_ITEM(v, 0));
        if (PyList_Check(v) && PyList_GET_SIZE(v) == 4) return prep_entry(it, &PyList_GET_ITEM(v, 0));
        return 0;
    }
    if ((it->u8 = utf8_of(it->key, &it->n)) == NULL) return 0;
    set_head(it);
    return (it->h = utf8_of(v, &it->hn)) != NULL;
}

/* Without the GIL (it touches no Python object): ``items`` sorted by key and written as one JSON
 * object into ``b``. 1: done; 0: a key comes twice (a dict's keys never do); -1: no memory. */
static int write_sorted(item_t *items, Py_ssize_t n, int entries, buf_t *b) {
    qsort(items, (size_t)n, sizeof(item_t), cmp_items);
    for (Py_ssize_t k = 1; k < n; k++) {
        if (cmp_items(&items[k - 1], &items[k]) == 0) return 0;
    }
    /* a guess at the size (a path and an entry are ~90 bytes): growing 8 MB by doubling copies it */
    if (!buf_room(b, (size_t)n * (entries ? 96 : 48) + 2) || !buf_put(b, "{", 1)) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        const item_t *it = &items[i];
        int ok = (i == 0 || buf_put(b, ",", 1)) && buf_jstr(b, it->u8, it->n) && buf_put(b, ":", 1);
        if (ok && entries) {
            ok = buf_put(b, "[", 1) && buf_jstr(b, it->h, it->hn) && buf_put(b, ",", 1) && buf_ll(b, it->mode)
                && buf_put(b, ",", 1) && buf_ll(b, it->size) && buf_put(b, ",", 1)
                && (it->t == NULL ? buf_put(b, "null", 4) : buf_jstr(b, it->t, it->tn)) && buf_put(b, "]", 1);
        } else if (ok) {
            ok = buf_jstr(b, it->h, it->hn);
        }
        if (!ok) return -1;
    }
    return buf_put(b, "}", 1) ? 1 : -1;
}

/* sorted_json(d, entries) (see above) */
static PyObject *sorted_json(PyObject *self, PyObject *args) {
    PyObject *d;
    int entries;
    if (!PyArg_ParseTuple(args, "O!p", &PyDict_Type, &d, &entries)) return NULL;
    Py_ssize_t n = PyDict_GET_SIZE(d), pos = 0, k = 0;
    item_t *items = malloc(sizeof(item_t) * (size_t)(n ? n : 1));
    if (items == NULL) return PyErr_NoMemory();
    buf_t b = {NULL, 0, 0};
    PyObject *key, *val, *result = NULL;
    int rc = 1;
    while (rc && PyDict_Next(d, &pos, &key, &val)) {
        items[k].key = key;
        rc = prep_item(&items[k], val, entries);
        k++;
    }
    if (rc) rc = write_sorted(items, n, entries, &b);
    if (rc > 0) result = PyBytes_FromStringAndSize(b.b, (Py_ssize_t)b.len);
    else if (rc == 0) result = Py_NewRef(Py_None);  /* not of that shape: the Python way */
    else if (!PyErr_Occurred()) PyErr_NoMemory();
    free(items);
    free(b.b);
    return result;
}

/* ---- a walk's records as a manifest's parts --------------------------------------------------
 * rows_and_parts(dirs, skipped) -> (rows, entries, skipped, entries_json | None) | None
 * walk.Scan.found_rows_and_parts (its Python twin) for a scan with no single-path rows: every
 * row of the per-directory records ``dirs`` (d -> (levels, {name: row}, others)) by its path
 * (the name '' is the empty directory d itself), and the manifest's entries {path: (hash, mode,
 * size, target)} and skip reasons (a hash "!reason"), ``skipped`` (a dict, filled in place)
 * holding the walk's own; and the entries' JSON in key order (sorted_json's), sorted and written
 * on a thread of their own (they touch no Python object) while this one fills the dicts.
 * entries_json None: they do not fit that shape (the Python way writes them). None when a
 * record is not of the shape above. */

typedef struct {
    item_t *items;
    Py_ssize_t n;
    buf_t b;
    int rc;
} sort_job_t;

static void *sort_job(void *arg) {
    sort_job_t *j = arg;
    j->rc = write_sorted(j->items, j->n, 1, &j->b);
    return NULL;
}

static PyObject *rows_and_parts(PyObject *self, PyObject *args) {
    PyObject *dirs, *skipped;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &dirs, &PyDict_Type, &skipped)) return NULL;
    PyObject *out = NULL, *slash = PyUnicode_FromString("/"), *entries = NULL, *json = NULL, *result = NULL;
    /* every row by its path (owned), in walk order; the entries among them: the k-th is rows[ent_at[k]] */
    PyObject **paths = NULL, **rows = NULL;
    Py_ssize_t *ent_at = NULL;
    item_t *items = NULL;
    Py_ssize_t n = 0, cap = 0, ne = 0;
    sort_job_t job = {NULL, 0, {NULL, 0, 0}, 0};
    int started = 0, plain = 1;
    pthread_t tid;
    if (slash == NULL) goto done;
    Py_ssize_t i = 0;
    PyObject *d, *rec;
    while (PyDict_Next(dirs, &i, &d, &rec)) {
        if (!PyUnicode_Check(d) || !PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) != 3
                || !PyDict_Check(PyTuple_GET_ITEM(rec, 1))) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        PyObject *names = PyTuple_GET_ITEM(rec, 1);
        PyObject *prefix = PyUnicode_GET_LENGTH(d) ? PyUnicode_Concat(d, slash) : Py_NewRef(d);
        if (prefix == NULL) goto done;
        Py_ssize_t j = 0;
        PyObject *name, *row;
        while (PyDict_Next(names, &j, &name, &row)) {
            if (!PyUnicode_Check(name) || !PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 4
                    || !PyTuple_Check(PyTuple_GET_ITEM(row, 0)) || PyTuple_GET_SIZE(PyTuple_GET_ITEM(row, 0)) != 5
                    || !PyUnicode_Check(PyTuple_GET_ITEM(row, 1)) || PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(row, 1)) == 0) {
                Py_DECREF(prefix);
                result = Py_NewRef(Py_None);
                goto done;
            }
            if (n == cap) {
                Py_ssize_t ncap = cap ? cap * 2 : 4096;
                PyObject **np = realloc(paths, sizeof(PyObject *) * (size_t)ncap);
                if (np != NULL) paths = np;
                PyObject **nr = np == NULL ? NULL : realloc(rows, sizeof(PyObject *) * (size_t)ncap);
                if (nr != NULL) rows = nr;
                Py_ssize_t *na = nr == NULL ? NULL : realloc(ent_at, sizeof(Py_ssize_t) * (size_t)ncap);
                if (na != NULL) ent_at = na;
                item_t *ni = na == NULL ? NULL : realloc(items, sizeof(item_t) * (size_t)ncap);
                if (ni == NULL) {
                    Py_DECREF(prefix);
                    PyErr_NoMemory();
                    goto done;
                }
                items = ni;
                cap = ncap;
            }
            PyObject *path = PyUnicode_GET_LENGTH(name) ? PyUnicode_Concat(prefix, name) : Py_NewRef(d);
            if (path == NULL) {
                Py_DECREF(prefix);
                goto done;
            }
            paths[n] = path;
            rows[n] = row;  /* borrowed: ``dirs`` holds it */
            if (PyUnicode_READ_CHAR(PyTuple_GET_ITEM(row, 1), 0) != '!') {
                PyObject *key = PyTuple_GET_ITEM(row, 0);
                item_t *it = &items[ne];
                it->key = path;
                ent_at[ne] = n;
                /* the entry's four fields, from the row (its tuple is made below, meanwhile) */
                PyObject *fields[4] = {PyTuple_GET_ITEM(row, 1), PyTuple_GET_ITEM(key, 4), PyTuple_GET_ITEM(key, 0),
                                       PyTuple_GET_ITEM(row, 3)};
                plain = plain && prep_entry(it, fields);
                ne++;
            }
            n++;
        }
        Py_DECREF(prefix);
    }
    if (plain) {  /* the sort and the JSON on their own thread, which takes no signal */
        job.items = items;
        job.n = ne;
        started = ne >= 1024 && start_quiet(&tid, sort_job, &job);
        if (!started) sort_job(&job);
    }
    /* meanwhile: the rows by path, the skips, the entries (``items`` is the thread's) */
    out = _PyDict_NewPresized(n);
    entries = _PyDict_NewPresized(ne);
    if (out == NULL || entries == NULL) goto done;
    for (Py_ssize_t k = 0, e = 0; k < n; k++) {
        PyObject *row = rows[k], *h = PyTuple_GET_ITEM(row, 1);
        if (PyDict_SetItem(out, paths[k], row) < 0) goto done;
        if (e < ne && ent_at[e] == k) {
            PyObject *key = PyTuple_GET_ITEM(row, 0);
            PyObject *entry = atoms(PyTuple_Pack(4, h, PyTuple_GET_ITEM(key, 4), PyTuple_GET_ITEM(key, 0),
                                                 PyTuple_GET_ITEM(row, 3)));
            int a = entry == NULL ? -1 : PyDict_SetItem(entries, paths[k], entry);
            Py_XDECREF(entry);
            if (a < 0) goto done;
            e++;
        } else {
            PyObject *reason = PyUnicode_Substring(h, 1, PyUnicode_GET_LENGTH(h));
            int a = reason == NULL ? -1 : PyDict_SetItem(skipped, paths[k], reason);
            Py_XDECREF(reason);
            if (a < 0) goto done;
        }
    }
    if (started) {
        Py_BEGIN_ALLOW_THREADS
        pthread_join(tid, NULL);
        Py_END_ALLOW_THREADS
        started = 0;
    }
    if (plain && job.rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    /* (not plain text, or a path twice: no JSON, the Python way writes the manifest) */
    if (plain && job.rc > 0 && (json = PyBytes_FromStringAndSize(job.b.b, (Py_ssize_t)job.b.len)) == NULL) goto done;
    result = Py_BuildValue("(OOOO)", out, entries, skipped, json ? json : Py_None);
done:
    if (started) {  /* (an error above while the thread ran: it still owns ``items``) */
        Py_BEGIN_ALLOW_THREADS
        pthread_join(tid, NULL);
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t k = 0; k < n; k++) Py_DECREF(paths[k]);
    free(paths);
    free(rows);
    free(ent_at);
    free(items);
    free(job.b.b);
    Py_XDECREF(out);
    Py_XDECREF(entries);
    Py_XDECREF(json);
    Py_XDECREF(slash);
    return result;
}

/* ---- git's index ----------------------------------------------------------------------------
 * index_entries(data, prefix, racy_ns, count, version, want_attributes[, as_table])
 *     -> (rows | table, end, attributes | None) | None
 * The entries part of workspacetrack.gitsource._parse_index (its Python twin, which documents
 * the rules): stage-0 regular-file entries under ``prefix`` whose mtime is older than
 * ``racy_ns``, none assume-valid, skip-worktree or intent-to-add, as
 * {path below prefix: (size, mtime_ns, ctime_ns, ino, blob hex)}; ``end`` is the offset after the
 * last entry; ``attributes`` the repository path of every .gitattributes entry. None for
 * anything malformed (every length is checked against the buffer before it is read). With
 * ``as_table``, the rows are a table (above) for fresh_dir and index_row, not a dict. */

static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static PyObject *index_entries(PyObject *self, PyObject *args) {
    Py_buffer buf, pre;
    long long racy_ns;
    unsigned int count, version;
    int want_attrs, as_table = 0;
    if (!PyArg_ParseTuple(args, "y*y*LIIp|p", &buf, &pre, &racy_ns, &count, &version, &want_attrs, &as_table))
        return NULL;
    const unsigned char *data = buf.buf;
    size_t len = (size_t)buf.len, plen = (size_t)pre.len, pos = 12;
    const char *prefix = pre.buf;
    ixtab_t *tab = as_table ? calloc(1, sizeof(ixtab_t)) : NULL;
    PyObject *rows = as_table ? NULL : PyDict_New();
    PyObject *attrs = want_attrs ? PyList_New(0) : Py_NewRef(Py_None), *result = NULL;
    char *prev = NULL;
    size_t prevlen = 0, prevcap = 0;
    if (as_table ? tab == NULL : rows == NULL) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    if (attrs == NULL) goto done;
    for (unsigned int i = 0; i < count; i++) {
        if (len < 62 || pos > len - 62) goto malformed;
        const unsigned char *e = data + pos;
        size_t start = pos;
        uint32_t cs = be32(e), cns = be32(e + 4), ms = be32(e + 8), mns = be32(e + 12), ino = be32(e + 20),
                 mode = be32(e + 24), size = be32(e + 36);
        const unsigned char *oid = e + 40;
        unsigned int flags = ((unsigned int)e[60] << 8) | e[61];
        pos += 62;
        unsigned int skip = flags & 0xB000;
        if (flags & 0x4000) {
            if (version < 3 || pos + 2 > len) goto malformed;
            skip |= data[pos] & 0x60;
            pos += 2;
        }
        const char *name;
        size_t nlen;
        if (version == 4) {
            /* varint: how much of the previous name to drop */
            if (pos >= len) goto malformed;
            unsigned int c = data[pos++];
            unsigned long long strip = c & 127;
            while (c & 128) {
                if (pos >= len || strip > (1ULL << 40)) goto malformed;
                c = data[pos++];
                strip = ((strip + 1) << 7) | (c & 127);
            }
            const unsigned char *nul = memchr(data + pos, 0, len - pos);
            if (nul == NULL || strip > prevlen) goto malformed;
            size_t keep = prevlen - (size_t)strip, suffix = (size_t)(nul - (data + pos));
            if (keep + suffix > prevcap) {
                size_t cap = (keep + suffix) * 2 + 64;
                char *b = realloc(prev, cap);
                if (b == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                prev = b;
                prevcap = cap;
            }
            memcpy(prev + keep, data + pos, suffix);
            prevlen = keep + suffix;
            pos += suffix + 1;
            name = prev;
            nlen = prevlen;
        } else {
            nlen = flags & 0xFFF;
            if (nlen == 0xFFF) {
                const unsigned char *nul = memchr(data + pos, 0, len - pos);
                if (nul == NULL) goto malformed;
                nlen = (size_t)(nul - (data + pos));
            }
            if (pos + nlen > len) goto malformed;
            name = (const char *)data + pos;
            pos = start + ((pos - start + nlen + 8) & ~(size_t)7);
        }
        if (want_attrs && nlen >= 14 && memcmp(name + nlen - 14, ".gitattributes", 14) == 0
                && (nlen == 14 || name[nlen - 15] == '/')) {
            PyObject *a = PyBytes_FromStringAndSize(name, (Py_ssize_t)nlen);
            if (a == NULL || PyList_Append(attrs, a) < 0) {
                Py_XDECREF(a);
                goto done;
            }
            Py_DECREF(a);
        }
        if (skip || (mode >> 12) != 010) continue;
        long long mtime = (long long)ms * 1000000000LL + mns;
        if (mtime >= racy_ns) continue;
        if (plen) {
            if (nlen < plen || memcmp(name, prefix, plen) != 0) continue;
            name += plen;
            nlen -= plen;
        }
        long long ctime = (long long)cs * 1000000000LL + cns;
        if (tab != NULL) {
            if (!ixtab_add(tab, name, nlen, size, mtime, ctime, ino, oid)) {
                PyErr_NoMemory();
                goto done;
            }
            continue;
        }
        PyObject *key = PyUnicode_DecodeFSDefaultAndSize(name, (Py_ssize_t)nlen);
        if (key == NULL) goto done;
        /* (size, mtime, ctime, ino, blob hex), built directly: Py_BuildValue parses its format
         * for each of 100,000 entries */
        PyObject *val = PyTuple_New(5), *hexs = hex_of(oid);
        if (val != NULL && hexs != NULL) {
            PyObject *v[4] = {PyLong_FromUnsignedLong(size), PyLong_FromLongLong(mtime), PyLong_FromLongLong(ctime),
                              PyLong_FromUnsignedLong(ino)};
            for (int k = 0; k < 4; k++) {
                if (v[k] == NULL) {
                    for (int m = 0; m < 4; m++) Py_XDECREF(v[m]);
                    Py_CLEAR(val);
                    break;
                }
            }
            if (val != NULL) {
                for (int k = 0; k < 4; k++) PyTuple_SET_ITEM(val, k, v[k]);
                PyTuple_SET_ITEM(val, 4, hexs);
                hexs = NULL;
                atoms(val);
            }
        }
        Py_XDECREF(hexs);
        if (val == NULL || PyDict_SetItem(rows, key, val) < 0) {
            Py_DECREF(key);
            Py_XDECREF(val);
            goto done;
        }
        Py_DECREF(key);
        Py_DECREF(val);
    }
    if (tab != NULL) {
        if (!ixtab_index(tab)) {
            PyErr_NoMemory();
            goto done;
        }
        rows = PyCapsule_New(tab, IXTAB_NAME, ixtab_capsule_free);
        if (rows == NULL) goto done;
        tab = NULL;  /* the capsule owns it */
    }
    result = Py_BuildValue("(OnO)", rows, (Py_ssize_t)pos, attrs);
    goto done;
malformed:
    result = Py_NewRef(Py_None);
done:
    ixtab_free(tab);
    free(prev);
    Py_XDECREF(rows);
    Py_XDECREF(attrs);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&pre);
    return result;
}

/* index_row(table, path_bytes, key, threshold) -> CacheRow | None: walk.index_row's rule for the
 * Python callers (a file C did not examine), against the table */
static PyObject *index_row(PyObject *self, PyObject *args) {
    PyObject *cap, *key;
    const char *p;
    Py_ssize_t n;
    long long threshold;
    if (!PyArg_ParseTuple(args, "Oy#O!L", &cap, &p, &n, &PyTuple_Type, &key, &threshold)) return NULL;
    ixtab_t *tab = table_arg(cap);
    if (tab == NULL) return NULL;
    long long v[5];
    if (PyTuple_GET_SIZE(key) != 5) Py_RETURN_NONE;
    for (int k = 0; k < 5; k++) {
        int overflow = 0;
        v[k] = PyLong_Check(PyTuple_GET_ITEM(key, k)) ? PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(key, k), &overflow) : -1;
        if (PyErr_Occurred() || overflow || !PyLong_Check(PyTuple_GET_ITEM(key, k))) {
            PyErr_Clear();
            Py_RETURN_NONE;  /* no entry holds such a stat */
        }
    }
    PyObject *row = ixent_row(ixtab_find(tab, p, (size_t)n), key, v[0], v[1], v[2], (unsigned long long)v[3],
                              threshold);
    if (row == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return row;
}

/* index_beyond(table, rows) -> dict: the stat-cache rows {path: row} the table does NOT vouch for
 * (gitsource.IndexView.vouches for each, in one pass: a regular file whose stat key matches its
 * entry as ixent_row decides, with the entry's blob id) */
static PyObject *index_beyond(PyObject *self, PyObject *args) {
    PyObject *cap, *rows;
    if (!PyArg_ParseTuple(args, "OO!", &cap, &PyDict_Type, &rows)) return NULL;
    ixtab_t *tab = table_arg(cap);
    if (tab == NULL) return NULL;
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    Py_ssize_t pos = 0;
    PyObject *path, *row;
    while (PyDict_Next(rows, &pos, &path, &row)) {
        int vouched = 0;
        PyObject *key = PyTuple_Check(row) && PyTuple_GET_SIZE(row) == 4 ? PyTuple_GET_ITEM(row, 0) : NULL;
        PyObject *h = key != NULL ? PyTuple_GET_ITEM(row, 1) : NULL;
        long long v[5];
        int ok = key != NULL && PyUnicode_Check(path) && PyTuple_Check(key) && PyTuple_GET_SIZE(key) == 5
            && PyUnicode_Check(h) && PyUnicode_IS_ASCII(h) && PyUnicode_GET_LENGTH(h) == 40;
        for (int k = 0; ok && k < 5; k++) ok = ll_of(PyTuple_GET_ITEM(key, k), &v[k]);
        if (ok && S_ISREG((mode_t)v[4])) {
            PyObject *enc = PyUnicode_IS_ASCII(path) ? NULL : PyUnicode_EncodeFSDefault(path);
            if (enc == NULL && PyErr_Occurred()) {
                Py_DECREF(out);
                return NULL;
            }
            const char *p = enc ? PyBytes_AS_STRING(enc) : (const char *)PyUnicode_DATA(path);
            Py_ssize_t n = enc ? PyBytes_GET_SIZE(enc) : PyUnicode_GET_LENGTH(path);
            const ixent_t *e = ixtab_find(tab, p, (size_t)n);
            if (ixent_matches(e, v[0], v[1], v[2], (unsigned long long)v[3])) {
                Py_UCS1 hx[40];
                hex_into(hx, e->oid);
                vouched = memcmp(hx, PyUnicode_1BYTE_DATA(h), 40) == 0;
            }
            Py_XDECREF(enc);
        }
        if (!vouched && PyDict_SetItem(out, path, row) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* table_rows(table) -> dict: the table as index_entries' dict (its path keys decoded as os does) */
static PyObject *table_rows(PyObject *self, PyObject *cap) {
    ixtab_t *tab = table_arg(cap);
    if (tab == NULL) return NULL;
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    for (size_t i = 0; i <= tab->mask && tab->slots != NULL; i++) {
        if (tab->slots[i] == 0) continue;
        const ixent_t *e = &tab->ents[tab->slots[i] - 1];
        PyObject *k = PyUnicode_DecodeFSDefaultAndSize(tab->names.b + e->name_off, e->name_len);
        PyObject *v = k == NULL ? NULL : Py_BuildValue("(kLLkN)", (unsigned long)e->size32, e->mtime, e->ctime,
                                                       (unsigned long)e->ino32, hex_of(e->oid));
        if (v == NULL || PyDict_SetItem(out, k, v) < 0) {
            Py_XDECREF(k);
            Py_XDECREF(v);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(k);
        Py_DECREF(v);
    }
    return out;
}


/* ---- a manifest's entries, picked by path -----------------------------------------------------
 * pick_entries(data, wanted, rule_names) -> (picked, count, start, end) | None: one pass over the
 * JSON of a stored manifest (as put_manifest / put_delta wrote it) without building an object per
 * entry: ``picked`` maps each path of ``entries`` that is in the set ``wanted``, or whose last
 * component is one of the bytes in ``rule_names``, to the JSON bytes of its value; ``count`` is
 * the number of entries; data[start:end] is the ``entries`` object itself. None when the text is
 * not what the writers write (a name with an escape, a missing key...): the caller then parses
 * the document in full (workspacetrack/store.py: the Python twin). */
static const char *json_str_end(const char *p, const char *end, int *escaped) {
    /* p just after an opening quote: the closing quote, or NULL */
    while (p < end) {
        const char *q = memchr(p, '"', (size_t)(end - p));
        if (q == NULL) return NULL;
        const char *b = q;
        while (b > p && b[-1] == '\\') b--;
        if (b != q) *escaped = 1;
        if (((q - b) & 1) == 0) return q;
        p = q + 1;
    }
    return NULL;
}

/* The paths ``pick_entries`` looks for, by their UTF-8 bytes (open addressing on fnv1a): a key
 * of the manifest is looked up without making a str of it and hashing that (100,000 of those
 * were most of the pass). A ``wanted`` element that is not a str, or not encodable as strict
 * UTF-8 (a surrogate-escaped name), can equal no key the pass accepts: it is left out. */
typedef struct {
    const char **p;   /* the bytes of each path (owned by its str object, alive for the call) */
    size_t *n;
    size_t mask;      /* slots - 1; slot i holds index + 1 into p/n, 0 when empty */
    uint32_t *slots;
} pathset_t;

static void pathset_free(pathset_t *s) {
    free(s->p);
    free(s->n);
    free(s->slots);
}

/* 1: built; 0: no memory (an exception is set) */
static int pathset_of(PyObject *wanted, pathset_t *s) {
    Py_ssize_t size = PySet_GET_SIZE(wanted);
    size_t slots = 16;
    while (slots < (size_t)size * 2 + 1) slots <<= 1;
    s->p = malloc(sizeof(char *) * (size_t)(size ? size : 1));
    s->n = malloc(sizeof(size_t) * (size_t)(size ? size : 1));
    s->slots = calloc(slots, sizeof(uint32_t));
    s->mask = slots - 1;
    if (s->p == NULL || s->n == NULL || s->slots == NULL) {
        pathset_free(s);
        PyErr_NoMemory();
        return 0;
    }
    PyObject *it = PyObject_GetIter(wanted);
    if (it == NULL) {
        pathset_free(s);
        return 0;
    }
    Py_ssize_t k = 0;
    PyObject *item;
    while ((item = PyIter_Next(it)) != NULL) {
        Py_ssize_t n;
        /* (the UTF-8 bytes are cached on the str, which the set keeps alive for the call) */
        const char *b = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &n) : NULL;
        Py_DECREF(item);
        if (b == NULL) {
            PyErr_Clear();
            continue;
        }
        size_t i = (size_t)fnv1a(b, (size_t)n) & s->mask;
        while (s->slots[i] != 0) i = (i + 1) & s->mask;
        s->p[k] = b;
        s->n[k] = (size_t)n;
        s->slots[i] = (uint32_t)(++k);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        pathset_free(s);
        return 0;
    }
    return 1;
}

static int pathset_has(const pathset_t *s, const char *p, size_t n) {
    size_t i = (size_t)fnv1a(p, n) & s->mask;
    for (;;) {
        uint32_t v = s->slots[i];
        if (v == 0) return 0;
        if (s->n[v - 1] == n && memcmp(s->p[v - 1], p, n) == 0) return 1;
        i = (i + 1) & s->mask;
    }
}

static PyObject *pick_entries(PyObject *self, PyObject *args) {
    const char *data;
    Py_ssize_t len;
    PyObject *wanted, *rule_names;
    if (!PyArg_ParseTuple(args, "y#OO", &data, &len, &wanted, &rule_names)) return NULL;
    if (!PyAnySet_Check(wanted) || !PyTuple_Check(rule_names)) {
        PyErr_SetString(PyExc_TypeError, "wanted must be a set and rule_names a tuple of bytes");
        return NULL;
    }
    Py_ssize_t n_rules = PyTuple_GET_SIZE(rule_names);
    for (Py_ssize_t i = 0; i < n_rules; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(rule_names, i))) {
            PyErr_SetString(PyExc_TypeError, "rule_names must be bytes");
            return NULL;
        }
    }
    static const char key[] = "{\"format_version\":";
    static const char ent[] = ",\"entries\":{";
    const char *end = data + len;
    if ((size_t)len < sizeof key || memcmp(data, key, sizeof key - 1) != 0) Py_RETURN_NONE;
    const char *p = data + sizeof key - 1;
    while (p < end && *p >= '0' && *p <= '9') p++;
    if ((size_t)(end - p) < sizeof ent - 1 || memcmp(p, ent, sizeof ent - 1) != 0) Py_RETURN_NONE;
    p += sizeof ent - 1;
    Py_ssize_t start = (p - 1) - data;
    pathset_t set;
    if (!pathset_of(wanted, &set)) return NULL;
    PyObject *picked = PyDict_New();
    if (picked == NULL) {
        pathset_free(&set);
        return NULL;
    }
    Py_ssize_t count = 0;
    if (p < end && *p == '}') {
        p++;
        goto done;
    }
    for (;;) {
        if (p >= end || *p != '"') goto fallback;
        int escaped = 0;
        const char *k0 = p + 1;
        const char *k1 = json_str_end(k0, end, &escaped);
        if (k1 == NULL || escaped || memchr(k0, '\\', (size_t)(k1 - k0)) != NULL)
            goto fallback;  /* a name with an escape (a wire-form name, a quote...): the full parse */
        p = k1 + 1;
        if (p + 1 >= end || p[0] != ':' || p[1] != '[') goto fallback;
        const char *v0 = p + 1;
        p = v0 + 1;
        /* the value: a flat array of strings, ints and null */
        for (;;) {
            if (p >= end) goto fallback;
            if (*p == '"') {
                int esc = 0;
                const char *q = json_str_end(p + 1, end, &esc);
                if (q == NULL) goto fallback;
                p = q + 1;
            } else if (*p == ']') {
                break;
            } else if (*p == '[' || *p == '{') {
                goto fallback;
            } else {
                p++;
            }
        }
        const char *v1 = ++p;  /* just after ']' */
        count++;
        int want = 0;
        for (Py_ssize_t i = 0; i < n_rules && !want; i++) {
            PyObject *r = PyTuple_GET_ITEM(rule_names, i);
            Py_ssize_t rl = PyBytes_GET_SIZE(r);
            Py_ssize_t kl = k1 - k0;
            if (kl >= rl && memcmp(k1 - rl, PyBytes_AS_STRING(r), (size_t)rl) == 0
                && (kl == rl || k1[-rl - 1] == '/'))
                want = 1;
        }
        if (!want) want = pathset_has(&set, k0, (size_t)(k1 - k0));
        if (want) {
            /* (a key that is not valid UTF-8 is no str any wanted path equals: the full parse) */
            PyObject *name = PyUnicode_DecodeUTF8(k0, k1 - k0, NULL);
            if (name == NULL) {
                PyErr_Clear();
                goto fallback;
            }
            PyObject *v = PyBytes_FromStringAndSize(v0, v1 - v0);
            if (v == NULL || PyDict_SetItem(picked, name, v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(name);
                goto error;
            }
            Py_DECREF(v);
            Py_DECREF(name);
        }
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == '}') {
            p++;
            break;
        }
        goto fallback;
    }
done:
    pathset_free(&set);
    return Py_BuildValue("(Nnnn)", picked, count, start, (Py_ssize_t)(p - data));
fallback:
    pathset_free(&set);
    Py_DECREF(picked);
    Py_RETURN_NONE;
error:
    pathset_free(&set);
    Py_DECREF(picked);
    return NULL;
}


static PyMethodDef methods[] = {
    {"list_dirs", list_dirs, METH_VARARGS, "Many directories listed on threads, packed; None per failure."},
    {"same_packed", same_packed, METH_VARARGS, "same_dir on a packed listing."},
    {"unpack", unpack, METH_VARARGS, "A packed listing as (name, key) pairs, or None."},
    {"fresh_dir", fresh_dir, METH_VARARGS, "A directory's entries examined in full; None when C cannot."},
    {"rows_and_parts", rows_and_parts, METH_VARARGS, "A walk's records as rows, entries and skips."},
    {"index_row", index_row, METH_VARARGS, "The row git's index table vouches for a file's stat, or None."},
    {"table_rows", table_rows, METH_O, "An index table as index_entries' dict."},
    {"index_beyond", index_beyond, METH_VARARGS, "The stat-cache rows an index table does not vouch for."},
    {"sorted_json", sorted_json, METH_VARARGS, "A manifest's entries or skips sorted, and their JSON, or None."},
    {"index_entries", index_entries, METH_VARARGS, "The entries of git's index a stat can vouch for, or None."},
    {"pick_entries", pick_entries, METH_VARARGS, "A manifest's entries of some paths, as JSON, in one pass; or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "workspacetrack._fastwalk",
    "The stat walk's per-directory loops in C (see workspacetrack/walk.py).", -1, methods,
};

/* API: the version of what this module offers; workspacetrack/fastext.py uses the module only
 * when it matches (an editable install keeps a stale build after a pull until it is rebuilt). */
PyMODINIT_FUNC PyInit__fastwalk(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", 8) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
