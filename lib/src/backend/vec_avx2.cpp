// The vector kernels (backend/vec.h) for AVX2 and FMA (-mavx2 -mfma, lib/CMakeLists.txt);
// portable builds only.
#define TG_VEC_LEVEL avx2
#include "backend/vec_kernels.h"
