// Shared by the zoo's kernels: the affine step every compute-bound pair iterates.
//   y <- fma(y, ZOO_C, ZOO_D), ZOO_C = 1 - 2^-12, ZOO_D = 2^-12
// so after k steps y_k = 1 + ZOO_C^k (x - 1) (the float64 reference's closed form).
#pragma once
#define ZOO_C 0.999755859375f
#define ZOO_D 0.000244140625f
