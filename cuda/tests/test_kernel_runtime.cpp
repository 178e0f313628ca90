/* test_kernel_runtime.cpp: the arithmetic of the device's random draws and
   fused optimizer steps, compiled for the host from the kernels' headers
   (kernels/random.h, kernels/optim.h) and checked bit for bit against
   libember's CPU: every random op of the core (rand, randn, randint,
   uniform_, normal_) in each dtype it takes, for several seeds, at offsets
   left by earlier draws of odd and even sizes, with the draw described as
   the core hands it to the backend; and 5 steps of SGD (momentum, dampening,
   nesterov, weight decay, maximize) and of Adam, AdamW and AMSGrad in
   float32 and float64, state flushed to zero included. What it cannot check
   is CUDA's double log, cos and sqrt on the device (randn's Box-Muller):
   NVIDIA documents them within 1 to 2 ulp of double, far below float32's. */
#include "kernels/optim.h"
#include "kernels/random.h"
#include "check.h"

#include <math.h>
#include <string.h>
#include <vector>

using namespace ember_cuda;

/* ------------------------------------------------------------------ random */
struct random_case {
    const char *name;
    int dist, dtype;
    double a, b;   /* the core's description: low, high; mean, std; low, range */
};

static const random_case RANDOM_CASES[] = {
    {"rand", EMBER__DRAW_UNIFORM, EMBER_FLOAT32, 0, 1},
    {"rand", EMBER__DRAW_UNIFORM, EMBER_FLOAT64, 0, 1},
    {"rand", EMBER__DRAW_UNIFORM, EMBER_FLOAT16, 0, 1},
    {"rand", EMBER__DRAW_UNIFORM, EMBER_BFLOAT16, 0, 1},
    {"uniform_", EMBER__DRAW_UNIFORM, EMBER_FLOAT32, -3, 1e-7},
    {"uniform_", EMBER__DRAW_UNIFORM, EMBER_FLOAT64, 2.5, 7},
    {"randn", EMBER__DRAW_NORMAL, EMBER_FLOAT32, 0, 1},
    {"randn", EMBER__DRAW_NORMAL, EMBER_FLOAT64, 0, 1},
    {"randn", EMBER__DRAW_NORMAL, EMBER_BFLOAT16, 0, 1},
    {"normal_", EMBER__DRAW_NORMAL, EMBER_FLOAT32, -1.5, 0.3},
    {"normal_", EMBER__DRAW_NORMAL, EMBER_FLOAT64, 4, 2},
    {"randint", EMBER__DRAW_INT, EMBER_INT64, -5, 10},
    {"randint", EMBER__DRAW_INT, EMBER_INT64, -4611686018427387904.0, 9223372036854775807.0},
    {"randint", EMBER__DRAW_INT, EMBER_INT32, 3, 1000},
    {"randint", EMBER__DRAW_INT, EMBER_UINT8, 0, 256},
    {"randint", EMBER__DRAW_INT, EMBER_FLOAT32, -100, 200},
    {"exponential_", EMBER__DRAW_EXPONENTIAL, EMBER_FLOAT32, 2, 0},
    {"exponential_", EMBER__DRAW_EXPONENTIAL, EMBER_FLOAT64, 0.5, 0},
    {"geometric_", EMBER__DRAW_GEOMETRIC, EMBER_INT64, 0.25, 0},
    {"geometric_", EMBER__DRAW_GEOMETRIC, EMBER_FLOAT32, 0.9, 0},
    {"bernoulli_", EMBER__DRAW_BERNOULLI, EMBER_FLOAT32, 0.3, 0},
    {"bernoulli_", EMBER__DRAW_BERNOULLI, EMBER_UINT8, 0.7, 0},
};

/* the CPU's draw of case c into a fresh tensor of n elements */
static ember_tensor *cpu_draw(const random_case &c, int64_t n)
{
    ember_tensor *t;
    if (!strcmp(c.name, "rand")) OK(ember_rand(1, &n, c.dtype, EMBER_CPU, &t));
    else if (!strcmp(c.name, "randn")) OK(ember_randn(1, &n, c.dtype, EMBER_CPU, &t));
    else if (!strcmp(c.name, "randint"))
        OK(ember_randint((int64_t)c.a, (int64_t)c.a + (int64_t)c.b, 1, &n, c.dtype, EMBER_CPU, &t));
    else {
        OK(ember_empty(1, &n, c.dtype, EMBER_CPU, &t));
        if (!strcmp(c.name, "uniform_")) OK(ember_uniform_(t, c.a, c.b));
        else if (!strcmp(c.name, "exponential_")) OK(ember_exponential_gen_(NULL, t, c.a));
        else if (!strcmp(c.name, "geometric_")) OK(ember_geometric_gen_(NULL, t, c.a));
        else if (!strcmp(c.name, "bernoulli_")) OK(ember_bernoulli_gen_(NULL, t, c.a));
        else OK(ember_normal_(t, c.a, c.b));
    }
    return t;
}

/* After earlier draws of `before` elements, case c drawn by the kernel body
   from the generator's state (in the order a grid of 3 blocks of 7 threads
   visits the elements) is the CPU's draw, and the CPU advanced its offset by
   the blocks the draw claims. */
static void random_one(const random_case &c, uint64_t seed, int64_t before, int64_t n)
{
    ember_manual_seed(seed);
    ember_tensor *earlier = cpu_draw(RANDOM_CASES[0], before);
    uint64_t s, offset, after;
    OK(ember_get_rng_state(&s, &offset));
    ember_tensor *cpu = cpu_draw(c, n);
    OK(ember_get_rng_state(&s, &after));
    CHECK(after - offset == ember__draw_blocks(c.dist, n), "%s: the offset moved %llu blocks", c.name,
          (unsigned long long)(after - offset));
    ember__draw d = {c.dist, c.dtype, s, offset, c.a, c.b};
    int esize = ember_dtype_size(c.dtype);
    std::vector<char> mine((size_t)(n * esize));
    for (int64_t start = 0; start < 21; start++)
        for (int64_t i = start; i < n; i += 21) draw_at(d, mine.data(), esize, i);
    CHECK(memcmp(mine.data(), ember_tensor_data(cpu), mine.size()) == 0, "%s %s, seed %llu after %lld elements",
          c.name, ember_dtype_name(c.dtype), (unsigned long long)seed, (long long)before);
    ember_tensor_release(earlier);
    ember_tensor_release(cpu);
}

static void check_random(void)
{
    for (uint64_t seed : {0ULL, 1ULL, 1234ULL, 0x123456789abcULL, ~0ULL})
        for (int64_t before : {0, 1, 7, 1000})
            for (const random_case &c : RANDOM_CASES) random_one(c, seed, before, 1001);
}

/* ------------------------------------------------------------------ optimizers */
template <class T> static std::vector<T> values(int64_t n, int k)
{
    std::vector<T> v((size_t)n);
    for (int64_t i = 0; i < n; i++) v[(size_t)i] = (T)(sin(0.7 * (double)(i + 1) * (k + 1)) * (k == 0 ? 1 : 0.5));
    v[0] = (T)0;              /* a zero gradient, whose state decays ... */
    v[1] = (T)(k ? 1e-39 : 1);   /* ... from near the subnormal range */
    return v;
}

template <class T> static ember_tensor *tensor_of(const std::vector<T> &v, int dt)
{
    ember_tensor *t;
    int64_t n = (int64_t)v.size();
    OK(ember_from_data(v.data(), dt, 1, &n, dt, EMBER_CPU, &t));
    return t;
}

template <class T> static bool same(const std::vector<T> &v, const ember_tensor *t)
{
    return memcmp(v.data(), ember_tensor_data(t), v.size() * sizeof(T)) == 0;
}

struct sgd_case {
    double lr, momentum, dampening, weight_decay;
    int nesterov, maximize;
};

template <class T> static void sgd_one(const sgd_case &c, int dt)
{
    const int64_t n = 257;
    std::vector<T> p = values<T>(n, 2), buf(n), g;
    ember_tensor *tp = tensor_of(p, dt), *tbuf = tensor_of(buf, dt);
    bool momentum = c.momentum != 0;
    for (int step = 1; step <= 5; step++) {
        g = step == 5 ? std::vector<T>((size_t)n) : values<T>(n, step);   /* a last step with no gradient */
        ember_tensor *tg = tensor_of(g, dt);
        OK(ember_sgd_step_(tp, tg, momentum ? tbuf : NULL, c.lr, c.momentum, c.dampening, c.weight_decay,
                           c.nesterov, c.maximize, step == 1));
        ember__sgd_args a = {c.lr, c.momentum, c.dampening, c.weight_decay, c.nesterov, c.maximize, step == 1};
        for (int64_t i = 0; i < n; i++) sgd_at(a, p.data(), momentum ? buf.data() : nullptr, g.data(), i);
        CHECK(same(p, tp) && same(buf, tbuf), "sgd %s step %d: momentum %g dampening %g wd %g nesterov %d",
              ember_dtype_name(dt), step, c.momentum, c.dampening, c.weight_decay, c.nesterov);
        ember_tensor_release(tg);
    }
    ember_tensor_release(tp);
    ember_tensor_release(tbuf);
}

struct adam_case {
    double lr, beta1, beta2, eps, weight_decay;
    int decoupled, amsgrad, maximize;
};

template <class T> static void adam_one(const adam_case &c, int dt)
{
    const int64_t n = 257;
    std::vector<T> p = values<T>(n, 3), m(n), v(n), vmax(n), g;
    ember_tensor *tp = tensor_of(p, dt), *tm = tensor_of(m, dt), *tv = tensor_of(v, dt), *tvmax = tensor_of(vmax, dt);
    for (int64_t step = 1; step <= 5; step++) {
        g = values<T>(n, (int)step);
        ember_tensor *tg = tensor_of(g, dt);
        OK(ember_adam_step_(tp, tg, tm, tv, c.amsgrad ? tvmax : NULL, c.lr, c.beta1, c.beta2, c.eps,
                            c.weight_decay, c.decoupled, c.maximize, step));
        /* the scalars as the core hands them to a backend */
        ember__adam_args a = {c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, 1 - pow(c.beta1, (double)step),
                              sqrt(1 - pow(c.beta2, (double)step)), c.decoupled, c.maximize};
        for (int64_t i = 0; i < n; i++)
            adam_at(a, p.data(), g.data(), m.data(), v.data(), c.amsgrad ? vmax.data() : nullptr, i);
        CHECK(same(p, tp) && same(m, tm) && same(v, tv) && same(vmax, tvmax),
              "adam %s step %lld: wd %g decoupled %d amsgrad %d maximize %d", ember_dtype_name(dt), (long long)step,
              c.weight_decay, c.decoupled, c.amsgrad, c.maximize);
        ember_tensor_release(tg);
    }
    for (ember_tensor *t : {tp, tm, tv, tvmax}) ember_tensor_release(t);
}

static void check_optimizers(void)
{
    static const sgd_case SGD[] = {
        {0.1, 0, 0, 0, 0, 0},      {0.05, 0, 0, 0.01, 0, 1},  {0.1, 0.9, 0, 0, 0, 0},
        {0.1, 0.9, 0.5, 1e-4, 0, 0}, {0.01, 0.9, 0, 0.1, 1, 0}, {0.3, 0.5, 0.1, 0, 1, 1},
    };
    static const adam_case ADAM[] = {
        {1e-3, 0.9, 0.999, 1e-8, 0, 0, 0, 0},   {1e-2, 0.8, 0.99, 1e-6, 0.1, 0, 0, 0},
        {1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 0, 0}, {5e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1, 0},
        {1e-3, 0.5, 0.9, 1e-3, 0, 0, 1, 1},
    };
    for (const sgd_case &c : SGD) {
        sgd_one<float>(c, EMBER_FLOAT32);
        sgd_one<double>(c, EMBER_FLOAT64);
    }
    for (const adam_case &c : ADAM) {
        adam_one<float>(c, EMBER_FLOAT32);
        adam_one<double>(c, EMBER_FLOAT64);
    }
}

int main(void)
{
    check_random();
    check_optimizers();
    return report("test_kernel_runtime");
}
