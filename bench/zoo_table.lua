-- The model zoo's table (spec/zoo_spec.lua): for each model, the lines of
-- its ember definition (spec/support/zoo.lua) and of PyTorch's
-- (spec/fixtures/zoo/gen.py), each between its "model:" and "end" markers,
-- and the largest absolute differences from PyTorch 1.13's float64 values
-- of the output and of any parameter's gradient, with ember in float64 and
-- in float32. Prints one JSON object per model.  luajit bench/zoo_table.lua
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local B = require("common")
local Z = require("zoo")

-- non-blank, non-comment lines between the markers of section `name`
local function lines(path, name, comment)
  local n, inside = 0, false
  for line in io.lines(path) do
    if line:match("^" .. comment .. "%s*%-+ model: " .. name .. "$") then inside = true
    elseif inside and line:match("^" .. comment .. "%s*%-+ end$") then return n
    elseif inside and line:match("%S") and not line:match("^%s*" .. comment) then n = n + 1 end
  end
  error("no section " .. name .. " in " .. path)
end

local SECTION = { encoder_post = "encoder", encoder_pre = "encoder", gpt_tied = "gpt", gpt = "gpt",
  lstm_lm = "rnn_lm", gru_lm = "rnn_lm", resnet18 = "resnet18", seq2seq = "seq2seq", mobilenet = "mobilenet",
  unet = "unet" }
for _, name in ipairs(Z.order) do
  local e64, e32 = Z.run(name, "float64"), Z.run(name, "float32")
  print(B.json({ bench = "zoo", model = name, lua_lines = lines("spec/support/zoo.lua", SECTION[name], "%-%-"),
    torch_lines = lines("spec/fixtures/zoo/gen.py", SECTION[name], "#"),
    f64_out = e64.out, f64_grad = e64.grad, f64_after = e64.after,
    f32_out = e32.out, f32_grad = e32.grad, f32_after = e32.after }))
end
