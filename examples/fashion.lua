-- What the Fashion-MNIST examples (fashion_mnist_mlp.lua,
-- fashion_mnist_cnn.lua) share: a model's test accuracy, and a run's loss
-- and accuracy curves as an SVG plot.
--   local fashion = require("fashion")
local M = {}

-- model's accuracy on the test set, in batches of batch_size, in eval mode
-- and without a graph (then back to train mode); autocast: a dtype to run
-- the forward under ember.autocast, or nil
function M.evaluate(ember, model, test, device, batch_size, autocast)
  model:eval()
  local correct = 0
  ember.no_grad(function()
    for x, y in ember.data.DataLoader(test, { batch_size = batch_size }):iter() do
      local _, pred = ember.autocast(autocast or false, function() return model(x:to(device)) end):max(2)
      correct = correct + pred:eq(y:to(device)):sum():item()
    end
  end)
  model:train()
  return correct / #test
end

-- history.loss and history.accuracy, one value an epoch, plotted to out/curves.svg
function M.plot(ember, out, history, title)
  ember.plot.svg(out .. "/curves.svg", {
    { name = "train loss", values = history.loss },
    { name = "test accuracy", values = history.accuracy, axis = "right" },
  }, { title = title, xlabel = "epoch" })
end

return M
