-- The tensor library's products (prod, bmm, baddbmm, addmm, outer, einsum,
-- tensordot, cdist) and counting (bincount, histc, unique).
-- Part of the everyday tensor library: lua/ember/tensorlib.lua passes
-- the helpers the parts share as L. Dims, index arguments and index
-- results are 1-based, as everywhere in ember.
return function(ember, L)
  local fail, is_tensor, errors, huge, unpack = L.fail, L.is_tensor, L.errors, L.huge, L.unpack
  local sh, is_float, def, options, need_tensor = L.sh, L.is_float, L.def, L.options, L.need_tensor
  local need_bool, need_int, pdim, like_opts = L.need_bool, L.need_int, L.pdim, L.like_opts
  local arange_on, with_dtype, sort_raw = L.arange_on, L.with_dtype, L.sort_raw
  local C, check, wrap, out1, dim0 = L.C, L.check, L.wrap, L.out1, L.dim0
  ---------------------------------------------------------------- products
  -- the product of every element (0-d) or along dim (a reduction of the op
  -- table); integer and bool give int64
  def("prod", 4, function(t, dim, keepdim, opts)
    need_tensor("prod", t, 1)
    if type(dim) == "table" then dim, opts = nil, dim end
    if type(keepdim) == "table" then keepdim, opts = nil, keepdim end
    t = with_dtype("prod", t, opts)
    keepdim = need_bool("prod", "keepdim", keepdim)
    if dim == nil and keepdim then fail("prod", "keepdim needs a dim") end
    local d = dim == nil and -1 or dim0("prod", dim, math.max(t:dim(), 1))
    check(C.ember_prod(t._c, t:dim() == 0 and -1 or d, keepdim and 1 or 0, out1))
    return wrap(out1[0])
  end, true)
  local function need_dims(op, t, n, what)
    if t:dim() ~= n then fail(op, ("%s must be %d-D, got shape %s"):format(what, n, sh(t))) end
  end
  -- batches of matrix products: (b, n, m) x (b, m, p) -> (b, n, p)
  def("bmm", 2, function(a, b)
    need_tensor("bmm", a, 1)
    need_tensor("bmm", b, 2)
    need_dims("bmm", a, 3, "batch1")
    need_dims("bmm", b, 3, "batch2")
    if a:size(1) ~= b:size(1) or a:size(3) ~= b:size(2) then
      fail("bmm", ("shapes %s and %s do not fit (b, n, m) x (b, m, p)"):format(sh(a), sh(b)))
    end
    return ember.matmul(a, b)
  end, true)
  local function scale_opts(op, opts)
    local o = options(op, opts, { beta = true, alpha = true })
    local beta, alpha = o.beta == nil and 1 or o.beta, o.alpha == nil and 1 or o.alpha
    if type(beta) ~= "number" then fail(op, "beta must be a number, got " .. type(beta)) end
    if type(alpha) ~= "number" then fail(op, "alpha must be a number, got " .. type(alpha)) end
    return beta, alpha
  end
  -- beta input + alpha product (beta = 0 ignores input, NaN included)
  local function add_product(op, input, p, beta, alpha)
    if alpha ~= 1 then p = p * alpha end
    if beta == 0 then return p:expand(p:shape()) + ember.zeros(p:shape(), like_opts(p)) end
    return (beta == 1 and input or input * beta) + p
  end
  def("baddbmm", 4, function(input, a, b, opts)
    need_tensor("baddbmm", input, 1)
    local beta, alpha = scale_opts("baddbmm", opts)
    return add_product("baddbmm", input, ember.bmm(a, b), beta, alpha)
  end, true)
  def("addmm", 4, function(input, a, b, opts)
    need_tensor("addmm", input, 1)
    need_tensor("addmm", a, 2)
    need_tensor("addmm", b, 3)
    local beta, alpha = scale_opts("addmm", opts)
    need_dims("addmm", a, 2, "mat1")
    need_dims("addmm", b, 2, "mat2")
    if a:size(2) ~= b:size(1) then fail("addmm", ("shapes %s and %s cannot be multiplied"):format(sh(a), sh(b))) end
    return add_product("addmm", input, ember.matmul(a, b), beta, alpha)
  end, true)
  def("outer", 2, function(a, b)
    need_tensor("outer", a, 1)
    need_tensor("outer", b, 2)
    need_dims("outer", a, 1, "input")
    need_dims("outer", b, 1, "vec2")
    return a:reshape({ a:numel(), 1 }) * b:reshape({ 1, b:numel() })
  end, true)
  ember.ger = ember.outer

  -- the contraction of a (labels la) and b (labels lb) keeping the labels in
  -- `keep` (a set), as one batched matmul: returns the tensor and its labels
  local function contract(a, la, b, lb, keep)
    local ina, inb = {}, {}
    for i = 1, #la do ina[la[i]] = i end
    for i = 1, #lb do inb[lb[i]] = i end
    -- labels of one operand only that are not kept: summed first
    local function sum_out(t, l, other)
      local dims, nl = {}, {}
      for i = 1, #l do
        if not other[l[i]] and not keep[l[i]] then dims[#dims + 1] = i else nl[#nl + 1] = l[i] end
      end
      if #dims > 0 then t = t:sum(dims) end
      return t, nl
    end
    a, la = sum_out(a, la, inb)
    b, lb = sum_out(b, lb, ina)
    ina, inb = {}, {}
    for i = 1, #la do ina[la[i]] = i end
    for i = 1, #lb do inb[lb[i]] = i end
    local batch, ca, cb, contr = {}, {}, {}, {}
    for _, l in ipairs(la) do
      if inb[l] then
        if keep[l] then batch[#batch + 1] = l else contr[#contr + 1] = l end
      else ca[#ca + 1] = l end
    end
    for _, l in ipairs(lb) do if not ina[l] then cb[#cb + 1] = l end end
    local function size_of(t, idx, l) return t:size(idx[l]) end
    local function prod_sizes(t, idx, ls)
      local p = 1
      for _, l in ipairs(ls) do p = p * size_of(t, idx, l) end
      return p
    end
    local pa, pb = {}, {}
    for _, l in ipairs(batch) do pa[#pa + 1], pb[#pb + 1] = ina[l], inb[l] end
    for _, l in ipairs(ca) do pa[#pa + 1] = ina[l] end
    for _, l in ipairs(contr) do pa[#pa + 1], pb[#pb + 1] = ina[l], inb[l] end
    for _, l in ipairs(cb) do pb[#pb + 1] = inb[l] end
    local B, M, K, N = 1, prod_sizes(a, ina, ca), 1, prod_sizes(b, inb, cb)
    local bshape = {}
    for _, l in ipairs(batch) do
      local sa, sb = size_of(a, ina, l), size_of(b, inb, l)
      local s = math.max(sa, sb)
      if sa ~= sb and sa ~= 1 and sb ~= 1 then
        fail("einsum", ("label '%s' has sizes %d and %d"):format(l, sa, sb))
      end
      bshape[#bshape + 1] = s
    end
    for _, l in ipairs(contr) do
      local sa, sb = size_of(a, ina, l), size_of(b, inb, l)
      if sa ~= sb then fail("einsum", ("label '%s' has sizes %d and %d"):format(l, sa, sb)) end
      K = K * sa
    end
    local ap = #pa > 0 and a:permute(pa) or a
    local bp = #pb > 0 and b:permute(pb) or b
    local sa, sbv = {}, {}
    for i, l in ipairs(batch) do sa[i], sbv[i] = size_of(a, ina, l), size_of(b, inb, l) end
    sa[#sa + 1], sa[#sa + 2] = M, K
    sbv[#sbv + 1], sbv[#sbv + 2] = K, N
    local r = ember.matmul(ap:reshape(sa), bp:reshape(sbv))
    local rs, rl = {}, {}
    for i, l in ipairs(batch) do rs[#rs + 1], rl[#rl + 1] = bshape[i], l end
    for _, l in ipairs(ca) do rs[#rs + 1], rl[#rl + 1] = size_of(a, ina, l), l end
    for _, l in ipairs(cb) do rs[#rs + 1], rl[#rl + 1] = size_of(b, inb, l), l end
    return r:reshape(rs), rl
  end
  -- a tensor with a repeated label ("ii") reduced to its diagonal
  local function take_diagonals(t, labels)
    local i = 1
    while i <= #labels do
      local j = i + 1
      while j <= #labels and labels[j] ~= labels[i] do j = j + 1 end
      if j <= #labels then
        if t:size(i) ~= t:size(j) then
          fail("einsum", ("label '%s' has sizes %d and %d in one operand"):format(labels[i], t:size(i), t:size(j)))
        end
        t = ember.diagonal(t, 0, i, j)   -- the diagonal becomes the last dim
        local l = labels[i]
        table.remove(labels, j)
        table.remove(labels, i)
        labels[#labels + 1] = l
      else
        i = i + 1
      end
    end
    return t, labels
  end
  -- Einstein summation: "ij,jk->ik" and the implicit form "ij,jk" (output: the
  -- labels that appear once, in order); "..." stands for the same leading
  -- dims in each operand
  function ember.einsum(eq, ...)
    if type(eq) ~= "string" then errors.argument("einsum", 1, "an equation string", eq) end
    local ops = { ... }
    if #ops == 1 and type(ops[1]) == "table" and not is_tensor(ops[1]) then ops = ops[1] end
    eq = eq:gsub("%s", "")
    local lhs, rhs = eq:match("^(.-)%->(.*)$")
    if not lhs then lhs = eq end
    local terms = {}
    for term in (lhs .. ","):gmatch("([^,]*),") do terms[#terms + 1] = term end
    if #terms ~= #ops then
      fail("einsum", ("the equation '%s' has %d operands, got %d tensors"):format(eq, #terms, #ops))
    end
    local ell_n = 0
    local labels = {}
    for k, term in ipairs(terms) do
      need_tensor("einsum", ops[k], k + 1)
      local ls, rest = {}, term
      local pre, post = term:match("^(.-)%.%.%.(.*)$")
      local nd = ops[k]:dim()
      if pre then
        rest = pre .. post
        if rest:find("%.") then fail("einsum", "'...' may appear once per operand, in '" .. term .. "'") end
      end
      if rest:find("[^%a]") then fail("einsum", ("bad label in '%s' (labels are letters)"):format(term)) end
      local nell = pre and nd - #rest or 0
      if nell < 0 or (not pre and #rest ~= nd) then
        fail("einsum", ("operand %d has %d dims, its term '%s' names %d"):format(k, nd, term, #rest))
      end
      ell_n = math.max(ell_n, nell)
      local p = pre or rest
      for c in p:gmatch(".") do ls[#ls + 1] = c end
      for e = 1, nell do ls[#ls + 1] = "." .. (nell - e + 1) end   -- ".k": the k-th dim from the end of "..."
      if pre then for c in post:gmatch(".") do ls[#ls + 1] = c end end
      labels[k] = ls
    end
    local out = {}
    if rhs then
      local pre, post = rhs:match("^(.-)%.%.%.(.*)$")
      local r = pre and (pre .. post) or rhs
      if r:find("[^%a]") then fail("einsum", "bad label in the output '" .. rhs .. "'") end
      local seen = {}
      local function add(c)
        if seen[c] then fail("einsum", "label '" .. c .. "' appears twice in the output") end
        seen[c] = true
        out[#out + 1] = c
      end
      for c in (pre or r):gmatch(".") do add(c) end
      if pre then
        for e = ell_n, 1, -1 do out[#out + 1] = "." .. e end
        for c in post:gmatch(".") do add(c) end
      end
      for _, c in ipairs(out) do
        local found = false
        for _, ls in ipairs(labels) do for _, l in ipairs(ls) do if l == c then found = true end end end
        if not found then fail("einsum", "output label '" .. c .. "' is in no operand") end
      end
    else
      local count = {}
      for _, ls in ipairs(labels) do for _, l in ipairs(ls) do count[l] = (count[l] or 0) + 1 end end
      for e = ell_n, 1, -1 do out[#out + 1] = "." .. e end
      local letters = {}
      for l, c in pairs(count) do if c == 1 and l:sub(1, 1) ~= "." then letters[#letters + 1] = l end end
      table.sort(letters)
      for _, l in ipairs(letters) do out[#out + 1] = l end
    end
    local outset = {}
    for _, l in ipairs(out) do outset[l] = true end
    -- operands with their diagonals taken
    local ts, ls = {}, {}
    for k = 1, #ops do ts[k], ls[k] = take_diagonals(ops[k], { unpack(labels[k]) }) end
    local t, l = ts[1], ls[1]
    for k = 2, #ops do
      local keep = {}
      for x in pairs(outset) do keep[x] = true end
      for j = k + 1, #ops do for _, x in ipairs(ls[j]) do keep[x] = true end end
      t, l = contract(t, l, ts[k], ls[k], keep)
    end
    -- what is left: sum the labels not in the output, then order them
    local dims, nl = {}, {}
    for i = 1, #l do if outset[l[i]] then nl[#nl + 1] = l[i] else dims[#dims + 1] = i end end
    if #dims > 0 then t = t:sum(dims) end
    if #nl > 0 then
      local pos, perm = {}, {}
      for i, x in ipairs(nl) do pos[x] = i end
      for i, x in ipairs(out) do perm[i] = pos[x] end
      t = t:permute(perm)
    end
    if t == ops[1] then t = t:clone() end
    return t
  end
  -- the sum of products over dims of a and b: dims = n (a's last n with b's
  -- first n) or {{a's dims}, {b's dims}}
  def("tensordot", 3, function(a, b, dims)
    need_tensor("tensordot", a, 1)
    need_tensor("tensordot", b, 2)
    dims = dims == nil and 2 or dims
    local da, db = {}, {}
    if type(dims) == "number" then
      need_int("tensordot", "dims", dims, 0)
      if dims > a:dim() or dims > b:dim() then
        fail("tensordot", ("dims = %d for shapes %s and %s"):format(dims, sh(a), sh(b)))
      end
      for i = 1, dims do da[i], db[i] = a:dim() - dims + i, i end
    elseif type(dims) == "table" and type(dims[1]) == "table" and type(dims[2]) == "table" and #dims[1] == #dims[2] then
      for i = 1, #dims[1] do
        da[i] = pdim("tensordot", dims[1][i], a:dim())
        db[i] = pdim("tensordot", dims[2][i], b:dim())
      end
    else
      fail("tensordot", "dims must be an integer or two lists of dims of one length")
    end
    local la, lb, used, nextc = {}, {}, {}, 0
    local function fresh() nextc = nextc + 1 return string.char(96 + nextc) end
    for i = 1, a:dim() do la[i] = fresh() end
    for i = 1, b:dim() do lb[i] = false end
    for i = 1, #da do
      if used[da[i]] then fail("tensordot", "dim " .. da[i] .. " of the first tensor appears twice") end
      used[da[i]] = true
      if lb[db[i]] then fail("tensordot", "dim " .. db[i] .. " of the second tensor appears twice") end
      lb[db[i]] = la[da[i]]
      if a:size(da[i]) ~= b:size(db[i]) then
        fail("tensordot", ("dim %d of %s and dim %d of %s differ"):format(da[i], sh(a), db[i], sh(b)))
      end
    end
    for i = 1, b:dim() do if not lb[i] then lb[i] = fresh() end end
    if nextc > 26 then fail("tensordot", "too many dims") end
    local o = {}
    for i = 1, a:dim() do if not used[i] then o[#o + 1] = la[i] end end
    local contracted = {}
    for i = 1, #db do contracted[db[i]] = true end
    for i = 1, b:dim() do if not contracted[i] then o[#o + 1] = lb[i] end end
    return ember.einsum(table.concat(la) .. "," .. table.concat(lb) .. "->" .. table.concat(o), a, b)
  end)
  -- the p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M): (..., P, R)
  def("cdist", 3, function(x1, x2, p)
    need_tensor("cdist", x1, 1)
    need_tensor("cdist", x2, 2)
    p = p == nil and 2 or p
    if type(p) ~= "number" or not (p >= 0) then fail("cdist", "p must be a number >= 0, got " .. tostring(p)) end
    if x1:dim() < 2 or x2:dim() < 2 or x1:size(-1) ~= x2:size(-1) then
      fail("cdist", ("x1 %s and x2 %s must be (..., P, M) and (..., R, M)"):format(sh(x1), sh(x2)))
    end
    if not is_float(x1) then fail("cdist", "expects floating-point tensors, got " .. x1.dtype) end
    local diff = x1:unsqueeze(-2) - x2:unsqueeze(-3)
    if p == 2 then
      -- zero distances have gradient 0, as PyTorch's
      local sq = (diff * diff):sum(-1)
      local zero = sq:eq(0)
      return ember.where(zero, 0, ember.where(zero, 1, sq):sqrt())
    end
    return diff:norm(p == huge and "inf" or p, -1)
  end)

  ---------------------------------------------------------------- counting
  -- counts of each value of a 1-D tensor of positive integers, 1-based as
  -- index tensors are: result[v] counts the entries equal to v (or sums their
  -- weights); length max(t, minlength)
  def("bincount", 2, function(t, opts)
    need_tensor("bincount", t, 1)
    local o = options("bincount", opts, { weights = true, minlength = true })
    if t:dim() ~= 1 or (t.dtype ~= "int64" and t.dtype ~= "int32" and t.dtype ~= "uint8") then
      fail("bincount", ("expects a 1-D integer tensor, got shape %s of %s"):format(sh(t), t.dtype))
    end
    local minlength = o.minlength or 0
    need_int("bincount", "minlength", minlength, 0)
    local n = minlength
    if t:numel() > 0 then
      local lo, hi = t:min():item(), t:max():item()
      if lo < 1 then fail("bincount", ("values are 1-based positions, got %d"):format(lo)) end
      n = math.max(n, hi)
    end
    local w = o.weights
    if w ~= nil then
      need_tensor("bincount", w, 2)
      if not errors.same_shape(w, t) then
        fail("bincount", ("weights of shape %s must have the input's shape %s"):format(sh(w), sh(t)))
      end
      if not is_float(w) then w = w:to("float64") end
    else
      w = ember.ones(t:shape(), like_opts(t, "int64"))
    end
    return ember.zeros({ n }, like_opts(w)):index_add(1, t:to("int64"), w)
  end, true)
  -- the histogram of t over bins equal bins on [min, max] (both 0: the data's
  -- range); elements outside (and NaN) are left out, max falls in the last bin
  def("histc", 4, function(t, bins, lo, hi)
    need_tensor("histc", t, 1)
    bins = bins == nil and 100 or bins
    need_int("histc", "bins", bins, 1)
    lo, hi = lo or 0, hi or 0
    if type(lo) ~= "number" or type(hi) ~= "number" then fail("histc", "min and max must be numbers") end
    if not is_float(t) then fail("histc", "expects a floating-point tensor, got " .. t.dtype) end
    local x = t:detach():reshape({ -1 })
    if lo == hi and x:numel() > 0 then
      local finite = x:isfinite()
      if finite:any():item() then
        lo = ember.where(finite, x, huge):min():item()
        hi = ember.where(finite, x, -huge):max():item()
      end
    end
    if lo == hi then lo, hi = lo - 1, hi + 1 end
    if not (lo < hi) or lo ~= lo or hi ~= hi or math.abs(lo) == huge or math.abs(hi) == huge then
      fail("histc", ("min %s and max %s must be finite with min <= max"):format(tostring(lo), tostring(hi)))
    end
    local inside = x:ge(lo):logical_and(x:le(hi))
    local pos = ember.where(inside, (x - lo) * (bins / (hi - lo)), 0):to("int64"):clamp(0, bins - 1) + 1
    return ember.zeros({ bins }, like_opts(t)):index_add(1, pos, inside:to(t.dtype))
  end, true)
  -- the sorted distinct values of t (flattened), or with {dim =} its distinct
  -- slices along dim in lexicographic order; with {return_inverse = true}
  -- also each element's (slice's) 1-based position among them, with
  -- {return_counts = true} their counts, returned in that order
  def("unique", 2, function(t, opts)
    need_tensor("unique", t, 1)
    local o = options("unique", opts, { sorted = true, return_inverse = true, return_counts = true, dim = true })
    need_bool("unique", "sorted", o.sorted)
    local inv, cnt = need_bool("unique", "return_inverse", o.return_inverse), need_bool("unique", "return_counts", o.return_counts)
    local d = o.dim ~= nil and pdim("unique", o.dim, math.max(t:dim(), 1)) or nil
    if d and t:dim() == 0 then fail("unique", "dim needs a tensor with at least 1 dim") end
    -- rows: the elements of the flattened tensor, or the slices along dim
    -- (flattened), sorted lexicographically by stable sorts from the last column
    local x = d and t:detach():transpose(d, 1) or t:detach():reshape({ -1 })
    local n = d and x:size(1) or x:numel()
    local flat = d and x:reshape({ n, -1 }) or x:reshape({ n, 1 })
    local idx = arange_on(n, t) + 1
    for c = flat:size(2), 1, -1 do
      local _, i = sort_raw("unique", flat:select(2, c):index_select(1, idx), 1, false)
      idx = idx:index_select(1, i)
    end
    local s = flat:index_select(1, idx)
    local new
    if n == 0 then
      new = ember.zeros({ 0 }, like_opts(t, "bool"))
    else
      local diff = s:narrow(1, 2, n - 1):ne(s:narrow(1, 1, n - 1)):any(2)
      new = ember.cat({ ember.ones({ 1 }, like_opts(t, "bool")), diff }, 1)
    end
    local starts = ember.nonzero(new):reshape({ -1 })
    local u = s:index_select(1, starts)
    if d then
      local shape = x:shape()
      shape[1] = starts:numel()
      u = u:reshape(shape):transpose(d, 1):contiguous()
    else
      u = u:reshape({ -1 })
    end
    local r = { u }
    if inv then
      local run = new:cumsum(1)   -- the run each sorted element belongs to (1-based)
      local where_ = ember.zeros({ n }, like_opts(t, "int64")):scatter(1, idx, run)
      r[#r + 1] = d and where_ or where_:reshape(t:shape())
    end
    if cnt then
      local k = starts:numel()
      local ends = ember.cat({ starts:narrow(1, 2, math.max(k - 1, 0)), ember.full({ 1 }, n + 1, like_opts(t, "int64")) }, 1)
      r[#r + 1] = k == 0 and ember.zeros({ 0 }, like_opts(t, "int64")) or ends - starts
    end
    return unpack(r)
  end, true)
end
