// dynlib.h: a shared library loaded while the program runs (dlopen) and a list of its functions
// looked up by name (dlsym), with one line saying why not. The GPU trainer loads cuBLASLt, NCCL
// and the CUDA driver this way when its engine starts (cuda_libs.cuh), so that --help, a flag
// error, --plan and the C engine never pay for them, and the program starts on machines that lack
// them. Plain C that C++ also accepts; glibc's dlopen (libdl on glibc before 2.34).
#ifndef COMMON_DYNLIB_H
#define COMMON_DYNLIB_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Loads the library `soname` (the dynamic loader's search: LD_LIBRARY_PATH, the cache, the default
// directories) and looks up names[0..n) into fns[0..n) (n may be 0: the library alone). `what`
// names it for a reader ("cuBLASLt", "the CUDA driver"). Returns the library's handle, kept open
// for the process's life; or NULL with every fns[i] NULL, nothing left loaded, and `why` set to
// one line:
//   "cannot load WHAT (SONAME): <dlerror>"            the library is absent or does not load
//   "WHAT (SONAME) has no NAME: <dlerror>"            a function is missing (an older library)
void* dynlib_load(const char* what, const char* soname, const char* const* names, void** fns, int n, char* why,
                  size_t why_cap);

#ifdef __cplusplus
}
#endif

#endif
