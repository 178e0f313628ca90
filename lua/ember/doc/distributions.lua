-- API reference: ember.distributions (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.distributions`: probability distributions

PyTorch 1.13's `torch.distributions` for the distributions below: the
parameters are numbers or floating point tensors (broadcast together; numbers
take the tensors' dtype, float32 when there is none), `d.batch_shape` and
`d.event_shape` are lists as PyTorch's, and every result is a tensor built
from ember's ops, so gradients reach the parameters through `log_prob`,
`entropy`, `kl_divergence` and `rsample`. Arguments are checked
(`validate_args`, on unless a constructor gets `{validate_args = false}`):
a scale that is not positive, probabilities outside [0, 1] and values outside
the support raise. Categorical values are 1-based category indices (int64),
as every index in ember. `sample` and `rsample` take an optional sample shape
(a list, or a number) and `{generator =}` (an `ember.Generator`; another
key raises). Example:
docs/pytorch_users.md.

### `ember.distributions.Normal(loc, scale, opts?)`
The normal distribution; `rsample` is `loc + eps * scale`. Also `d:cdf(x)`.

### `ember.distributions.Uniform(low, high, opts?)`
The uniform distribution on [low, high); `rsample` is `low + u * (high -
low)`. Also `d:cdf(x)`.

### `ember.distributions.Bernoulli(probs, opts?)`, `ember.distributions.Bernoulli{probs =}`, `ember.distributions.Bernoulli{logits =}`
Values 0 and 1 (in the parameters' dtype) with probability `probs` of a 1
(or `sigmoid(logits)`). `d.probs` and `d.logits` hold both forms. No
`rsample`. With `probs` first, `opts` may hold `validate_args` (`probs`
again raises); the caller's table is not written to.

### `ember.distributions.Categorical(probs, opts?)`, `ember.distributions.Categorical{probs =}`, `ember.distributions.Categorical{logits =}`
Categories `1..k` along the last dim of `probs` (normalised to sum to 1) or
`logits` (normalised by logsumexp); the other dims are the batch. `d.probs`
and `d.logits` hold both forms, `d:enumerate_support()` every value, `{k,
batch...}`. Samples are int64; mean and variance are NaN as PyTorch's. No
`rsample`.

### `ember.distributions.Gamma(concentration, rate, opts?)`
The gamma distribution (shape `concentration`, rate `rate`, both positive).
Samples by Marsaglia and Tsang's method on the CPU; `rsample` carries the
implicit reparameterisation gradient to `concentration` (as PyTorch's
`_standard_gamma`: dx/da = -(dP(a, x)/da) / p(x; a), here from the
incomplete gamma function, about 1e-8 relative where PyTorch's approximation
is about 1e-4) and the ordinary one to `rate`. `log_prob` and `entropy` use
lgamma and digamma composed from tensor ops (about 1e-10 in float64), so
they have gradients.

### `ember.distributions.Beta(concentration1, concentration0, opts?)`
The beta distribution on (0, 1), sampled as `X / (X + Y)` of two gammas;
`rsample` has Gamma's implicit gradients.

### `ember.distributions.Dirichlet(concentration, opts?)`
The Dirichlet distribution over the simplex of the last dim (the event);
sampled as normalised gammas; `rsample` has Gamma's implicit gradients.

### `ember.distributions.MultivariateNormal(loc, opts)`
The multivariate normal over the last dim of `loc`; `opts` has exactly one
of `covariance_matrix` (symmetric positive definite), `precision_matrix`
(its inverse, symmetric positive definite) and `scale_tril` (lower
triangular with a positive diagonal, used as given, as PyTorch's), and
`validate_args` (default true: a matrix that is not symmetric, not
positive definite or not lower triangular raises). The factor comes from
`ember.linalg.cholesky` (from the precision as PyTorch's: the Cholesky of
the flipped matrix, inverted by `linalg.solve_triangular`), and `log_prob`
and `kl_divergence` solve against it, so gradients reach every form.
`d.scale_tril`, `d:covariance_matrix()`, `d:precision_matrix()`; `rsample`
is `loc + scale_tril @ eps`.

### `ember.distributions.Independent(base, n, opts?)`
Reinterprets the last `n` batch dims of `base` as event dims: `log_prob` and
`entropy` sum over them.

### `ember.distributions.kl_divergence(p, q)`
KL(p || q), batch-shaped, for the pairs PyTorch registers among these:
Normal-Normal, Uniform-Uniform (inf where q's support does not cover p's),
Uniform-Normal, Bernoulli-Bernoulli, Categorical-Categorical, Gamma-Gamma,
Beta-Beta, Dirichlet-Dirichlet, MultivariateNormal-MultivariateNormal and
Independent-Independent; any other pair
raises naming both.

## `ember.distributions.Distribution`: what every distribution answers

### `Distribution:sample(shape?, opts?)`
Draws of shape `shape .. batch_shape .. event_shape`, without gradient.

### `Distribution:rsample(shape?, opts?)`
Reparameterised draws that carry gradients to the parameters (Normal,
Uniform, MultivariateNormal, Gamma, Beta, Dirichlet, and Independent over
them); Bernoulli and Categorical raise naming `sample` and the
score-function estimator.

### `Distribution:log_prob(x)`
The log density or mass of `x` (batch-shaped after broadcasting with the
batch).

### `Distribution:entropy()`
The entropy, batch-shaped.

### `Distribution:mean()`, `Distribution:variance()`, `Distribution:stddev()`
The moments, batch- and event-shaped (methods, where PyTorch has
properties).

### `Distribution:cdf(x)`
The cumulative distribution function (Normal, Uniform).

### `Distribution:enumerate_support()`
Every value of a discrete support (Categorical).
]==]
