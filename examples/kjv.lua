-- The King James Bible as a character data set, shared by the character
-- language models (char_lm.lua, char_lstm.lua): the text of the Debian
-- package bible-kjv (its `bible` program prints it) without verse labels,
-- its sorted vocabulary, the text as 1-based int64 ids, a 95/5
-- train/validation split, the unigram entropy, and batches of random
-- windows.
--   local kjv = require("kjv").load(ember, "char_lstm")
local M = {}

function M.load(ember, who)
  local p = io.popen('bible -f "gen1:1-rev22:21" 2>/dev/null')
  local text = p and p:read("*a") or ""
  if p then p:close() end
  if #text < 1e6 then
    error(who .. ": the King James Bible text is missing; install it with `apt install bible-kjv`", 0)
  end
  -- "Ge1:1 In the beginning ..." -> "In the beginning ..."
  text = text:gsub("[^\n]-%d+:%d+ ", "")
  local chars, index = {}, {}
  for c in text:gmatch(".") do
    if not index[c] then chars[#chars + 1] = c; index[c] = true end
  end
  table.sort(chars)
  for i, c in ipairs(chars) do index[c] = i end
  local ids = {}
  for i = 1, #text do ids[i] = index[text:sub(i, i)] end
  local data = ember.tensor(ids, { dtype = "int64" })

  -- the unigram entropy (nats per character): the loss of the best context-free model
  local freq = {}
  for c in text:gmatch(".") do freq[c] = (freq[c] or 0) + 1 end
  local H1 = 0
  for _, n in pairs(freq) do
    local q = n / #text
    H1 = H1 - q * math.log(q)
  end

  local kjv = { chars = chars, index = index, V = #chars, data = data, H1 = H1,
    n_train = math.floor(data:numel() * 0.95) }
  print(("%d characters, vocabulary %d, unigram entropy %.3f nats/char"):format(#text, kjv.V, H1))

  -- B random windows of T + 1 consecutive characters starting in [lo, hi - T - 1]:
  -- inputs (B, T) and next characters (B, T)
  function kjv.batch(lo, hi, B, T)
    local offs = ember.arange(T + 1, { dtype = "int64" }):view(1, T + 1)
    local starts = ember.randint(lo, hi - T - 1, { B, 1 }, { dtype = "int64" })
    local win = data:index_select(1, (starts + offs):reshape(-1)):view(B, T + 1)
    return win:narrow(2, 1, T), win:narrow(2, 2, T)
  end

  -- Trains params for opts.steps steps of batches (opts.batch, opts.context)
  -- from the training part: AdamW (opts.lr, weight decay 0.01), gradient
  -- norms clipped at 1, a cosine schedule down to lr / 10. loss_of(x, y) is
  -- the model's loss. Returns the steps and the smoothed training loss at
  -- every 10th step.
  function kjv.train(params, opts, loss_of)
    local optim = ember.optim
    local opt = optim.AdamW(params, { lr = opts.lr, weight_decay = 0.01 })
    local sched = optim.lr_scheduler.CosineAnnealingLR(opt, { T_max = opts.steps, eta_min = opts.lr / 10 })
    local gm = ember.autodiff.GradManager():attach(params)
    local bar = ember.progress(opts.steps, { desc = "training" })
    local steps, curve, smooth = {}, {}, nil
    for step = 1, opts.steps do
      local x, y = kjv.batch(1, kjv.n_train, opts.batch, opts.context)
      gm:record()
      local loss = loss_of(x, y)
      gm:backward(loss)
      optim.clip_grad_norm(params, 1.0)
      opt:step()
      opt:zero_grad()
      sched:step()
      local l = loss:item()
      smooth = smooth and 0.98 * smooth + 0.02 * l or l
      if step % 10 == 0 then steps[#steps + 1], curve[#curve + 1] = step, smooth end
      bar:update(1, { loss = ("%.3f"):format(smooth) })
    end
    bar:close()
    return steps, curve
  end

  -- the mean loss over 10 batches from the validation part
  function kjv.validate(loss_of, B, T)
    return ember.no_grad(function()
      local s = 0
      for _ = 1, 10 do s = s + loss_of(kjv.batch(kjv.n_train + 1, data:numel(), B, T)):item() end
      return s / 10
    end)
  end

  -- What both models share: the model moved to device and its parameter
  -- count printed (what: the model in words); returns its parameters and
  -- loss_of(x, y), its next-character loss on a batch of windows x, y (made
  -- on the CPU, moved to device).
  function kjv.prepare(model, device, what)
    model:to(device)
    local params, n = model:parameters(), 0
    for _, p in ipairs(params) do n = n + p:numel() end
    print(("model: %s, %d parameters"):format(what, n))
    return params, function(x, y)
      x, y = x:to(device), y:to(device)
      return ember.nn.functional.cross_entropy(model(x):reshape(-1, kjv.V), y:reshape(-1))
    end
  end

  -- the text of a list of ids
  function kjv.decode(list)
    local s = {}
    for i, id in ipairs(list) do s[i] = chars[id] end
    return table.concat(s)
  end

  return kjv
end

return M
