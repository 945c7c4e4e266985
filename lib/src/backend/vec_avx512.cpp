// The vector kernels (backend/vec.h) for AVX-512 F, CD, BW, DQ and VL with AVX2 and FMA
// (lib/CMakeLists.txt); portable builds only.
#define TG_VEC_LEVEL avx512
#include "backend/vec_kernels.h"
