// The vector kernels (backend/vec.h) compiled with the library's own flags (-march=native):
// the one set of a native build.
#define TG_VEC_LEVEL native
#include "backend/vec_kernels.h"
