-- batch_norm's training forward on operands that pass the last-level cache
-- (more than 32 MiB read and written: ember__stream_worth), whose y is
-- streamed past the cache from an L1 buffer: the bits of the same op on two
-- channels too small to stream (each channel's statistics and values are
-- computed alone), planes of a length that is no multiple of the buffer's
-- pieces or of a cache line, with and without its activation, on 1 thread
-- and on 2; and its adjoint, which fetches ahead there, likewise.
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional
local ffi = require("ffi")
local C = ember._C
local check = H.check_rc

-- batch_norm and its adjoint through the C API: gx and gwb for g
local out2 = ffi.new("ember_tensor*[2]")
local function bn_grads(g, x, w, b)
  check(C.ember_batch_norm(x._c, w._c, b._c, 1e-5, out2, out2 + 1))
  local _, st = ember._wrap(out2[0]), ember._wrap(out2[1])
  check(C.ember_batch_norm_backward(g._c, x._c, w._c, st._c, 1e-5, out2, out2 + 1))
  return ember._wrap(out2[0]), ember._wrap(out2[1])
end

describe("batch norm's training forward streamed past the cache", function()
  H.keep_thread_setting(before_each, after_each)
  local train = { training = true }
  -- samples of {5, 301, 301}: 1.8 MB in float32, so 10 of them pass 32 MiB with y (float64: 5)
  for _, c in ipairs({ { "float32", 10 }, { "float64", 5 } }) do
    local dt, N = c[1], c[2]
    it(("gives each channel the bits of two channels alone (%s, N %d, NCHW and channels_last)"):format(dt, N),
      function()
      ember.manual_seed(29)
      local x = ember.randn({ N, 5, 301, 301 }, { dtype = dt })
      local w, b = ember.randn({ 5 }, { dtype = dt }), ember.randn({ 5 }, { dtype = dt })
      for _, act in ipairs({ false, "relu6" }) do
        H.same_bits_on_threads(function()
          local y = F.batch_norm(x, nil, nil, w, b, { training = true, activation = act or nil })
          for _, c0 in ipairs({ 1, 4 }) do
            local ys = F.batch_norm(x:narrow(2, c0, 2):contiguous(), nil, nil, w:narrow(1, c0, 2),
              b:narrow(1, c0, 2), { training = true, activation = act or nil })
            assert.is_true(ember.equal(y:narrow(2, c0, 2):contiguous(), ys), "channels from " .. c0)
          end
          return { y }
        end)
      end
      -- the adjoint, whose first pass fetches each next block ahead: gx and
      -- gwb channel by channel
      local g = ember.randn({ N, 5, 301, 301 }, { dtype = dt })
      H.same_bits_on_threads(function()
        local gx, gwb = bn_grads(g, x, w, b)
        local sl = function(t) return t:narrow(2, 4, 2):contiguous() end
        local gxs, gwbs = bn_grads(sl(g), sl(x), w:narrow(1, 4, 2), b:narrow(1, 4, 2))
        assert.is_true(ember.equal(sl(gx), gxs))
        assert.is_true(ember.equal(gwb:narrow(2, 4, 2):contiguous(), gwbs))
        return { gx, gwb }
      end)
      -- channels_last: the column kernels, which do not stream (float32's runs
      -- depend on the columns a task takes, so it is held to NCHW's within rounding)
      local xc = x:contiguous({ memory_format = "channels_last" })
      local y, yc = F.batch_norm(x, nil, nil, w, b, train), F.batch_norm(xc, nil, nil, w, b, train)
      assert.is_true(H.max_diff(y, yc) < (dt == "float32" and 1e-4 or 1e-12))
      if dt == "float64" then
        local ys = F.batch_norm(xc:narrow(2, 4, 2):contiguous({ memory_format = "channels_last" }), nil, nil,
          w:narrow(1, 4, 2), b:narrow(1, 4, 2), train)
        assert.is_true(ember.equal(yc:narrow(2, 4, 2):contiguous(), ys:contiguous()))
      end
    end)
  end
end)
