-- layer_norm, layer_norm_backward and batch_norm on operands that pass the
-- last-level cache (more than 32 MiB read and written: ember__stream_worth),
-- whose results are streamed past the cache from an L1 buffer: the bits of
-- the same op on a slice too small to stream (layer norm's rows and batch
-- norm's channels are computed alone), rows of a length that is no multiple
-- of the buffer's pieces or of a cache line, on 1 thread and on 2.
local H = require("helpers")
local ember = H.ember
local ffi = require("ffi")
local F = ember.nn.functional
local C = ember._C
local check = H.check_rc

local out2 = ffi.new("ember_tensor*[2]")
local function ln(x, w, b)
  check(C.ember_layer_norm(x._c, w._c, b._c, 1, 0, 1e-5, out2, out2 + 1))
  return ember._wrap(out2[0]), ember._wrap(out2[1])
end
local function ln_backward(g, x, w, st)
  check(C.ember_layer_norm_backward(g._c, x._c, w._c, st._c, 1, 0, 1e-5, out2, nil))
  return ember._wrap(out2[0])
end

-- rows [r0, r0 + n) of t (R, D), contiguous
local function rows(t, r0, n) return t:narrow(1, r0, n):contiguous() end

describe("layer norm streamed past the cache", function()
  H.keep_thread_setting(before_each, after_each)
  -- float32 {4400, 1100}: 19.4 MB each, so x and y pass 32 MiB; float64 half the rows
  for _, c in ipairs({ { "float32", 4400 }, { "float64", 2200 } }) do
    local dt, R, D = c[1], c[2], 1100
    it(("gives each row the bits of a few rows alone (%s, %d x %d)"):format(dt, R, D), function()
      ember.manual_seed(33)
      local x = ember.randn({ R, D }, { dtype = dt })
      local w, b = ember.randn({ D }, { dtype = dt }), ember.randn({ D }, { dtype = dt })
      local g = ember.randn({ R, D }, { dtype = dt })
      local g1 = ember.full({}, 0.75, { dtype = dt }):expand({ R, D })   -- a sum's gradient, scaled
      H.same_bits_on_threads(function()
        local y, st = ln(x, w, b)
        local gx, gx1 = ln_backward(g, x, w, st), ln_backward(g1, x, w, st)
        for _, r0 in ipairs({ 1, R - 6 }) do
          local xs = rows(x, r0, 7)
          local ys, sts = ln(xs, w, b)
          assert.is_true(ember.equal(rows(y, r0, 7), ys), "y, rows from " .. r0)
          assert.is_true(ember.equal(st:narrow(2, r0, 7):contiguous(), sts), "stats, rows from " .. r0)
          assert.is_true(ember.equal(rows(gx, r0, 7), ln_backward(rows(g, r0, 7), xs, w, sts)),
            "gx, rows from " .. r0)
          assert.is_true(ember.equal(rows(gx1, r0, 7), ln_backward(rows(g1, r0, 7), xs, w, sts)),
            "gx of a broadcast gradient, rows from " .. r0)
        end
        return { y, st, gx, gx1 }
      end)
    end)
  end
end)

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
      -- channels_last: the column kernels (float32's runs depend on the
      -- columns a task takes, so its statistics are held to NCHW's within rounding)
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
