// dynlib.c: a shared library and its functions loaded at run time (see dynlib.h).
#include "dynlib.h"

#include <dlfcn.h>
#include <stdio.h>

void* dynlib_load(const char* what, const char* soname, const char* const* names, void** fns, int n, char* why,
                  size_t why_cap) {
    for (int i = 0; i < n; i++) fns[i] = NULL;  // until every one is found
    dlerror();  // clear an earlier error: the text below is this call's
    // RTLD_NOW: every function the library itself needs is bound here, so a broken install fails
    // now with the loader's words, not at the first call in the middle of a run. RTLD_LOCAL: its
    // symbols serve only the lookups below.
    void* lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char* err = dlerror();
        snprintf(why, why_cap, "cannot load %s (%s): %s", what, soname, err ? err : "no reason given");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        dlerror();
        fns[i] = dlsym(lib, names[i]);
        if (!fns[i]) {
            const char* err = dlerror();
            snprintf(why, why_cap, "%s (%s) has no %s: %s", what, soname, names[i], err ? err : "a NULL symbol");
            for (int j = 0; j < i; j++) fns[j] = NULL;
            dlclose(lib);
            return NULL;
        }
    }
    return lib;
}
