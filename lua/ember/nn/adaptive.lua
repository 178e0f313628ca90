-- Adaptive average pooling over a tensor's trailing dims, for
-- F.adaptive_avg_pool1d/2d/3d (pool.lua, resize.lua): output bin i of a dim
-- of size L pooled to n averages positions floor(i L / n) .. ceil((i + 1) L
-- / n) - 1, as PyTorch's. Global pooling (every size 1) is one mean;
-- equal bins in 2-D (14 -> 7) are average pooling's kernel with the bin as
-- window and stride; otherwise each dim is a product with a pooling matrix,
-- kept per size, dtype and device so it is built once.
local ember = require("ember")

local M = {}

function M.window(i, L, n) return math.floor(i * L / n), math.ceil((i + 1) * L / n) end

local matrices = setmetatable({}, { __mode = "v" })   -- "L n dtype device" -> the (n, L) matrix

local function pool_matrix(L, n, x)
  local key = ("%d %d %s %s"):format(L, n, x.dtype, tostring(x.device))
  local P = matrices[key]
  if P then return P end
  local rows = {}
  for i = 0, n - 1 do
    local lo, hi = M.window(i, L, n)
    local row = {}
    for j = 0, L - 1 do row[j + 1] = (j >= lo and j < hi) and 1 / (hi - lo) or 0 end
    rows[i + 1] = row
  end
  P = ember.tensor(rows, { dtype = x.dtype, device = x.device })
  matrices[key] = P
  return P
end

-- x averaged over its last #sizes dims down to sizes (each >= 1)
function M.average(x, sizes)
  local nd, last = #sizes, x:dim()
  local first = last - nd + 1
  local global, bins = true, true
  for i = 1, nd do
    global = global and sizes[i] == 1
    bins = bins and x:size(first + i - 1) % sizes[i] == 0
  end
  if global then   -- one mean over the trailing dims, kept as size-1 dims
    local dims = {}
    for i = 1, nd do dims[i] = first + i - 1 end
    return x:mean(dims, true)
  end
  if bins and nd == 2 and x:dim() == 4 then   -- equal windows: average pooling's kernel
    local kh, kw = x:size(3) / sizes[1], x:size(4) / sizes[2]
    return ember.nn.functional.avg_pool2d(x, { kh, kw }, { kh, kw })
  end
  for i = 1, nd do
    local dim = first + i - 1
    local P = pool_matrix(x:size(dim), sizes[i], x)
    if dim == last then x = x:matmul(P:t())
    else x = x:transpose(dim, last):matmul(P:t()):transpose(dim, last) end
  end
  return x
end

return M
