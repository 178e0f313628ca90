-- ember.autodiff.gradcheck: compares the Jacobian computed by backward with
-- central finite differences, in float64, entry by entry.
local ffi = require("ffi")
local errors = require("ember.errors")

return function(ember, autodiff)
  local C = ember._C

  -- the address of each element of a CPU float64 tensor, in row-major order
  local function element_ptrs(t)
    local shape, strides = t:shape(), t:stride()
    local base = ffi.cast("double *", C.ember_tensor_data(t._c))
    local list, idx = {}, {}
    local nd = #shape
    local function walk(d, off)
      if d > nd then
        list[#list + 1] = base + off
        return
      end
      for i = 0, shape[d] - 1 do walk(d + 1, off + i * strides[d]) end
    end
    if t:numel() > 0 then walk(1, 0) end
    return list, idx
  end

  local function outputs_of(fn, inputs)
    local out = { fn(unpack(inputs)) }
    local list = {}
    for _, y in ipairs(out) do if ember.is_tensor(y) then list[#list + 1] = y end end
    return list
  end
  -- the outputs' values as flat lists, taken at once: an output that is a
  -- view of an input (diagonal) changes when the input is perturbed next
  local function values_of(fn, inputs)
    local r = {}
    for o, y in ipairs(ember.no_grad(outputs_of, fn, inputs)) do
      r[o] = y:double():reshape({ y:numel() }):tolist()
    end
    return r
  end

  return function(fn, inputs, opts)
    opts = opts or {}
    errors.known_options("autodiff.gradcheck", opts, { "eps", "atol", "rtol", "raise" })
    local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
    local raise = opts.raise ~= false
    local diff = {}
    for i, x in ipairs(inputs) do
      if ember.is_tensor(x) and (x.dtype == "float32" or x.dtype == "float64" or x.dtype == "float16"
          or x.dtype == "bfloat16") then
        if x.dtype ~= "float64" then
          io.stderr:write(("ember.autodiff.gradcheck: warning: input %d is %s, not a double precision "
            .. "tensor; the check may fail for rounding alone\n"):format(i, x.dtype))
        end
        if x.device ~= "cpu" then errors.raise("ember.autodiff.gradcheck: inputs must be on the cpu") end
        diff[#diff + 1] = i
      end
    end
    -- analytical: one backward per output element
    local ys = ember.no_grad(outputs_of, fn, inputs)
    local analytical = {}   -- [out][in][out_elem][in_elem]
    for o, y in ipairs(ys) do
      analytical[o] = {}
      for _, i in ipairs(diff) do analytical[o][i] = {} end
      local n = y:numel()
      for k = 1, n do
        local gm = autodiff.GradManager()
        gm._unreached_ok = true   -- an output constant in the inputs: a zero Jacobian row
        local targets = {}
        for _, i in ipairs(diff) do
          targets[#targets + 1] = inputs[i]
          rawset(inputs[i], "_grad", nil)
        end
        gm:attach(targets)
        gm:record()
        local ok, err = pcall(function()
          local yy = outputs_of(fn, inputs)[o]
          local dy = ember.zeros(yy:shape(), { dtype = yy.dtype })
          dy:reshape({ n }):select(1, k):fill_(1)
          gm:backward(yy, dy)
        end)
        gm:release()
        if not ok then error(err, 0) end
        for _, i in ipairs(diff) do
          local g = rawget(inputs[i], "_grad")
          analytical[o][i][k] = g and ember.tensor(g:double():reshape({ g:numel() }):tolist(), { dtype = "float64" }) or false
          rawset(inputs[i], "_grad", nil)
        end
      end
    end
    -- numerical: central differences per input element
    for _, i in ipairs(diff) do
      local x = inputs[i]
      local work = x
      if x.dtype ~= "float64" then errors.raise("ember.autodiff.gradcheck: needs float64 inputs to perturb") end
      local ptrs = element_ptrs(work)
      -- each write is an in-place write: the version moves, so what ops keep
      -- derived from the input (eval batch norm's scale, a conv weight's layout) is made again
      local function write(p, v) p[0] = v; C.ember_tensor_bump_version(work._c) end
      for e, p in ipairs(ptrs) do
        local orig = p[0]
        write(p, orig + eps)
        local plus = values_of(fn, inputs)
        write(p, orig - eps)
        local minus = values_of(fn, inputs)
        write(p, orig)
        for o = 1, #ys do
          local a, b = plus[o], minus[o]
          for k = 1, #a do
            local num = (a[k] - b[k]) / (2 * eps)
            local ag = analytical[o][i][k]
            local ana = ag and ag:tolist()[e] or 0
            if math.abs(num - ana) > atol + rtol * math.abs(num) then
              local msg = ("ember.autodiff.gradcheck: Jacobian mismatch for output %d with respect to input %d "
                .. "at entry (%d, %d): numerical %.10g, analytical %.10g"):format(o, i, k, e, num, ana)
              if raise then errors.raise(msg) end
              return false, msg
            end
          end
        end
      end
    end
    return true
  end
end
