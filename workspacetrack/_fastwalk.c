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
 * And index_entries, the loop over git's index entries (see below; 100,000 entries in Python cost
 * ~100 ms of a cold capture).
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

static int is_store(const struct stat *st, long long store_dev, long long store_ino) {
    return store_ino >= 0 && (long long)st->st_dev == store_dev && (long long)st->st_ino == store_ino;
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
    char *buf;
    size_t len, cap;
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
    if (j->len + need > j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 4096;
        while (cap < j->len + need) cap *= 2;
        char *b = realloc(j->buf, cap);
        if (b == NULL) return 0;
        j->buf = b;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, r, sizeof(rec_t));
    memcpy(j->buf + j->len + sizeof(rec_t), name, r->namelen);
    memset(j->buf + j->len + sizeof(rec_t) + r->namelen, 0, need - sizeof(rec_t) - r->namelen);
    j->len += need;
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
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);  /* the workers inherit a mask that blocks every signal */
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&tids[started], NULL, worker, &w) == 0) started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
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
            item = PyBytes_FromStringAndSize(jobs[i].buf ? jobs[i].buf : "", (Py_ssize_t)jobs[i].len);
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
        free(jobs[i].buf);
    }
    free(jobs);
    return out;
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
            PyObject *key = atoms(Py_BuildValue("(LLLKl)", (long long)r.size, (long long)r.mtime,
                                                (long long)r.ctime, (unsigned long long)r.ino, (long)r.mode));
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

/* ---- a directory examined in full --------------------------------------------------------
 * fresh_dir(listing, prefix, root, old_rows, index, threshold, size_cap, known, match, ignores,
 *           rule_files) -> (mine, others, exact, subdirs, todo, hits, taken) | None
 * The per-entry loop of walk.Scan._list_dir (its Python twin, which documents the rules), for a
 * directory under at most one ignore level whose patterns look at names only: ``match`` is that
 * level's compiled pattern's match (None: no rules), ``ignores`` its group -> verdict table,
 * ``known`` its name -> verdict cache (filled here as in Python). Rows come from a trusted old row
 * with the same stat key, else from git's ``index`` entry with the same stat (None: not read
 * yet); every other file is left in ``todo`` as (name, key) for the caller to read. None when a
 * value does not fit or an entry is named in ``rule_files`` (the caller lists the directory in
 * Python). */

static PyObject *fresh_dir(PyObject *self, PyObject *args) {
    const char *buf;
    Py_ssize_t len;
    PyObject *prefix, *old_rows, *index, *known, *match, *ignores, *rule_files;
    int root;
    long long threshold, size_cap;
    if (!PyArg_ParseTuple(args, "y#UpO!OLLO!OO!O", &buf, &len, &prefix, &root, &PyDict_Type, &old_rows, &index,
                          &threshold, &size_cap, &PyDict_Type, &known, &match, &PyDict_Type, &ignores,
                          &rule_files))
        return NULL;
    if (!PyAnySet_Check(rule_files)) {
        PyErr_SetString(PyExc_TypeError, "rule_files must be a set");
        return NULL;
    }
    if (index != Py_None && !PyDict_Check(index)) {
        PyErr_SetString(PyExc_TypeError, "index must be a dict or None");
        return NULL;
    }
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
        int rf = PySet_Contains(rule_files, name);
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
        PyObject *key = atoms(Py_BuildValue("(LLLKl)", (long long)r.size, (long long)r.mtime, (long long)r.ctime,
                                            (unsigned long long)r.ino, (long)r.mode));
        if (key == NULL) goto fail_name;
        PyObject *rel = PyUnicode_Concat(prefix, name);
        if (rel == NULL) {
            Py_DECREF(key);
            goto fail_name;
        }
        PyObject *row = PyDict_GetItemWithError(old_rows, rel);  /* borrowed */
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
        if (made == NULL && index != Py_None && S_ISREG(r.mode) && r.size <= size_cap) {
            PyObject *ix = PyDict_GetItemWithError(index, rel);  /* (size32, mtime, ctime, ino32, blob) */
            if (ix == NULL && PyErr_Occurred()) goto fail_key;
            if (ix != NULL && PyTuple_Check(ix) && PyTuple_GET_SIZE(ix) == 5
                    && eq_ll(PyTuple_GET_ITEM(ix, 1), r.mtime)
                    && eq_ll(PyTuple_GET_ITEM(ix, 0), (long long)((uint64_t)r.size & 0xFFFFFFFFu))
                    && eq_ll(PyTuple_GET_ITEM(ix, 2), r.ctime)
                    && eq_ll(PyTuple_GET_ITEM(ix, 3), (long long)(r.ino & 0xFFFFFFFFu))) {
                long long newest = r.mtime > r.ctime ? r.mtime : r.ctime;
                made = atoms(PyTuple_Pack(4, key, PyTuple_GET_ITEM(ix, 4), newest < threshold ? Py_True : Py_False,
                                          Py_None));
                if (made == NULL) goto fail_key;
                taken++;
            }
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
        Py_DECREF(rel);
        Py_DECREF(key);
        Py_DECREF(name);
        continue;
    fail_key:
        Py_DECREF(rel);
        Py_DECREF(key);
    fail_name:
        Py_DECREF(name);
        goto done;
    }
    result = Py_BuildValue("(OOOOOnn)", mine, others, exact ? Py_True : Py_False, subdirs, todo, hits, taken);
done:
    Py_XDECREF(mine);
    Py_XDECREF(others);
    Py_XDECREF(subdirs);
    Py_XDECREF(todo);
    return result;
}

/* ---- a walk's records as a manifest's parts --------------------------------------------------
 * rows_and_parts(dirs, skipped) -> (rows, entries, skipped) | None
 * walk.Scan.found_rows_and_parts (its Python twin) for a scan with no single-path rows: every
 * row of the per-directory records ``dirs`` (d -> (levels, {name: row}, others)) by its path
 * (the name '' is the empty directory d itself), and the manifest's entries {path: (hash, mode,
 * size, target)} and skip reasons (a hash "!reason"), ``skipped`` (a dict, filled in place)
 * holding the walk's own. None when a record is not of that shape. */

static PyObject *rows_and_parts(PyObject *self, PyObject *args) {
    PyObject *dirs, *skipped;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &dirs, &PyDict_Type, &skipped)) return NULL;
    PyObject *out = PyDict_New(), *entries = PyDict_New(), *slash = PyUnicode_FromString("/");
    PyObject *result = NULL;
    if (out == NULL || entries == NULL || slash == NULL) goto done;
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
            PyObject *path = PyUnicode_GET_LENGTH(name) ? PyUnicode_Concat(prefix, name) : Py_NewRef(d);
            if (path == NULL || PyDict_SetItem(out, path, row) < 0) {
                Py_XDECREF(path);
                Py_DECREF(prefix);
                goto done;
            }
            PyObject *key = PyTuple_GET_ITEM(row, 0), *h = PyTuple_GET_ITEM(row, 1);
            int a;
            if (PyUnicode_READ_CHAR(h, 0) == '!') {
                PyObject *reason = PyUnicode_Substring(h, 1, PyUnicode_GET_LENGTH(h));
                a = reason == NULL ? -1 : PyDict_SetItem(skipped, path, reason);
                Py_XDECREF(reason);
            } else {
                PyObject *entry = atoms(PyTuple_Pack(4, h, PyTuple_GET_ITEM(key, 4), PyTuple_GET_ITEM(key, 0),
                                                     PyTuple_GET_ITEM(row, 3)));
                a = entry == NULL ? -1 : PyDict_SetItem(entries, path, entry);
                Py_XDECREF(entry);
            }
            Py_DECREF(path);
            if (a < 0) {
                Py_DECREF(prefix);
                goto done;
            }
        }
        Py_DECREF(prefix);
    }
    result = Py_BuildValue("(OOO)", out, entries, skipped);
done:
    Py_XDECREF(out);
    Py_XDECREF(entries);
    Py_XDECREF(slash);
    return result;
}

/* ---- git's index ----------------------------------------------------------------------------
 * index_entries(data, prefix, racy_ns, count, version, want_attributes)
 *     -> (rows, end, attributes | None) | None
 * The entries part of workspacetrack.gitsource._parse_index (its Python twin, which documents
 * the rules): stage-0 regular-file entries under ``prefix`` whose mtime is older than
 * ``racy_ns``, none assume-valid, skip-worktree or intent-to-add, as
 * {path below prefix: (size, mtime_ns, ctime_ns, ino, blob hex)}; ``end`` is the offset after the
 * last entry; ``attributes`` the repository path of every .gitattributes entry. None for
 * anything malformed (every length is checked against the buffer before it is read). */

static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static PyObject *index_entries(PyObject *self, PyObject *args) {
    Py_buffer buf, pre;
    long long racy_ns;
    unsigned int count, version;
    int want_attrs;
    if (!PyArg_ParseTuple(args, "y*y*LIIp", &buf, &pre, &racy_ns, &count, &version, &want_attrs)) return NULL;
    const unsigned char *data = buf.buf;
    size_t len = (size_t)buf.len, plen = (size_t)pre.len, pos = 12;
    const char *prefix = pre.buf;
    PyObject *rows = PyDict_New(), *attrs = want_attrs ? PyList_New(0) : Py_NewRef(Py_None), *result = NULL;
    char *prev = NULL;
    size_t prevlen = 0, prevcap = 0;
    static const char hexd[] = "0123456789abcdef";
    if (rows == NULL || attrs == NULL) goto done;
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
        char hex[40];
        for (int k = 0; k < 20; k++) {
            hex[2 * k] = hexd[oid[k] >> 4];
            hex[2 * k + 1] = hexd[oid[k] & 15];
        }
        PyObject *key = PyUnicode_DecodeFSDefaultAndSize(name, (Py_ssize_t)nlen);
        if (key == NULL) goto done;
        PyObject *val = atoms(Py_BuildValue("(kLLks#)", (unsigned long)size, mtime,
                                      (long long)cs * 1000000000LL + cns, (unsigned long)ino, hex, (Py_ssize_t)40));
        if (val == NULL || PyDict_SetItem(rows, key, val) < 0) {
            Py_DECREF(key);
            Py_XDECREF(val);
            goto done;
        }
        Py_DECREF(key);
        Py_DECREF(val);
    }
    result = Py_BuildValue("(OnO)", rows, (Py_ssize_t)pos, attrs);
    goto done;
malformed:
    result = Py_NewRef(Py_None);
done:
    free(prev);
    Py_XDECREF(rows);
    Py_XDECREF(attrs);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&pre);
    return result;
}

static PyMethodDef methods[] = {
    {"list_dirs", list_dirs, METH_VARARGS, "Many directories listed on threads, packed; None per failure."},
    {"same_packed", same_packed, METH_VARARGS, "same_dir on a packed listing."},
    {"unpack", unpack, METH_VARARGS, "A packed listing as (name, key) pairs, or None."},
    {"fresh_dir", fresh_dir, METH_VARARGS, "A directory's entries examined in full; None when C cannot."},
    {"rows_and_parts", rows_and_parts, METH_VARARGS, "A walk's records as rows, entries and skips."},
    {"index_entries", index_entries, METH_VARARGS, "The entries of git's index a stat can vouch for, or None."},
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
    if (m != NULL && PyModule_AddIntConstant(m, "API", 4) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
