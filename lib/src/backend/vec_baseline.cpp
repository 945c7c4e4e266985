// The vector kernels (backend/vec.h) for baseline x86-64 (SSE2), which every x86-64 CPU runs;
// portable builds only.
#define TG_VEC_LEVEL baseline
#include "backend/vec_kernels.h"
