/* The headers the committed bindings are generated from (cargo xtask bindings). */
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>
