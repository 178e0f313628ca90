-- One valid call of each public name outside ember.nn, for the walk of
-- spec/arguments_spec.lua (an extra argument and an unknown option must
-- raise): name -> a function returning the call's arguments (for a method,
-- self first; n when a nil sits among them). Most ops take the same
-- arguments as a function (ember.add(a, b)) and as a method (a:add(b)), so
-- they are listed once, by op, and entered under both names.
return function(ember)
  local calls = {}

  local function x2() return ember.randn({ 4, 3 }) end
  local function pos() return ember.rand({ 4, 3 }) + 0.5 end
  local function t3() return ember.randn({ 3 }) end
  local function spd() return ember.eye(3) * 2 + 0.1 end
  local function ints() return ember.tensor({ 1, 2, 2, 3 }, { dtype = "int64" }) end
  local function idx() return ember.tensor({ { 1, 2, 3 }, { 3, 2, 1 } }, { dtype = "int64" }) end
  local function batch() return ember.randn({ 2, 3, 3 }) end
  local function mask() return ember.tensor({ { true, false, true } }) end
  local function lin() return ember.nn.Linear(3, 2) end

  -- op -> arguments, for ember.<op> and Tensor:<op> alike (each where it exists)
  local OPS = {}
  for op in ("abs cos exp neg relu sigmoid sign silu sin tanh erf mish isfinite isinf isnan logical_not clone "
    .. "contiguous detach fliplr flipud trace"):gmatch("%S+") do
    OPS[op] = function() return { x2() } end
  end
  for op in ("log log1p rsqrt sqrt digamma lgamma trigamma"):gmatch("%S+") do
    OPS[op] = function() return { pos() } end
  end
  for op in ("add sub mul div eq ne ge gt le lt maximum minimum equal"):gmatch("%S+") do
    OPS[op] = function() return { x2(), x2() } end
  end
  for op in ("logical_and logical_or logical_xor"):gmatch("%S+") do
    OPS[op] = function() return { x2():gt(0), x2():gt(0) } end
  end
  for op in ("all any"):gmatch("%S+") do OPS[op] = function() return { x2():gt(0), 2, true } end end
  for op in ("argmax argmin max min mean median mode sum"):gmatch("%S+") do
    OPS[op] = function() return { x2(), 2, true } end
  end
  for op in ("std var"):gmatch("%S+") do OPS[op] = function() return { x2(), 2, true, false } end end
  for op in ("cholesky det inverse slogdet"):gmatch("%S+") do OPS[op] = function() return { spd() } end end
  for op in ("softmax log_softmax logcumsumexp"):gmatch("%S+") do OPS[op] = function() return { x2(), 2 } end end
  for op in ("tril triu"):gmatch("%S+") do OPS[op] = function() return { x2(), 0 } end end
  OPS.allclose = function() return { x2(), x2(), 1e-5, 1e-8, false } end
  OPS.isclose = OPS.allclose
  OPS.argsort = function() return { x2(), 2, true } end
  OPS.sort = OPS.argsort
  OPS.addmm = function() return { ember.randn({ 4, 2 }), x2(), ember.randn({ 3, 2 }), { beta = 1, alpha = 1 } } end
  OPS.baddbmm = function() return { batch(), batch(), batch(), {} } end
  OPS.bmm = function() return { batch(), batch() } end
  OPS.bincount = function() return { ints(), { minlength = 4 } } end
  OPS.bucketize = function() return { t3(), ember.tensor({ -1, 0, 1 }), { right = false } } end
  OPS.searchsorted = function() return { ember.tensor({ -1, 0, 1 }), t3(), { right = false } } end
  OPS.cat = function() return { { x2(), x2() }, 1 } end
  OPS.stack = OPS.cat
  OPS.cdist = function() return { x2(), x2(), 2 } end
  OPS.chunk = function() return { x2(), 2, 1 } end
  OPS.split = OPS.chunk
  OPS.clamp = function() return { x2(), -0.5, 0.5 } end
  OPS.clamp_ = OPS.clamp
  OPS.cumsum = function() return { x2(), 2, {} } end
  OPS.cumprod = OPS.cumsum
  OPS.diag = function() return { x2(), 0 } end
  OPS.diagonal = function() return { x2(), 0, 1, 2 } end
  OPS.eigh = function() return { spd(), "L" } end
  OPS.flatten = function() return { batch(), 1, -1 } end
  OPS.flip = function() return { x2(), { 1 } } end
  OPS.as_strided = function() return { x2(), { 2, 2 }, { 3, 1 }, 0 } end
  OPS.gather = function() return { x2(), 2, ember.tensor({ { 1 }, { 2 }, { 3 }, { 1 } }, { dtype = "int64" }) } end
  OPS.gelu = function() return { x2(), {} } end
  OPS.ger = function() return { t3(), t3() } end
  OPS.outer = OPS.ger
  OPS.histc = function() return { x2(), 4, -1, 1 } end
  OPS.index_add = function() return { x2(), 1, ember.tensor({ 1, 3 }, { dtype = "int64" }), ember.ones({ 2, 3 }) } end
  OPS.index_add_ = OPS.index_add
  OPS.index_fill = function() return { x2(), 1, ember.tensor({ 1, 3 }, { dtype = "int64" }), 0 } end
  OPS.index_select = function() return { x2(), 1, ember.tensor({ 1, 3 }, { dtype = "int64" }) } end
  OPS.kthvalue = function() return { x2(), 2, 2, true } end
  OPS.logsumexp = function() return { x2(), 2, true } end
  OPS.lstsq = function() return { spd(), ember.randn({ 3, 2 }) } end
  OPS.solve = OPS.lstsq
  OPS.masked_fill = function() return { ember.randn({ 2, 3 }), mask(), 0 } end
  OPS.masked_fill_ = OPS.masked_fill
  OPS.matmul = function() return { x2(), ember.randn({ 3, 2 }) } end
  OPS.narrow = function() return { x2(), 1, 2, 2 } end
  OPS.nonzero = function() return { x2(), { as_tuple = false } } end
  OPS.norm = function() return { x2(), 2, 2, true } end
  OPS.pow = function() return { pos(), 2 } end
  OPS.pow_ = OPS.pow
  OPS.prod = function() return { x2(), 2, true, {} } end
  OPS.qr = function() return { x2(), "reduced" } end
  OPS.repeat_interleave = function() return { x2(), 2, 1 } end
  OPS.roll = function() return { x2(), 1, 1 } end
  OPS.scatter = function() return { ember.zeros({ 2, 3 }), 2, idx(), ember.ones({ 2, 3 }), {} } end
  OPS.scatter_add = function() return { ember.zeros({ 2, 3 }), 2, idx(), ember.ones({ 2, 3 }) } end
  OPS.select = function() return { x2(), 1, 2 } end
  OPS.squeeze = function() return { ember.randn({ 4, 1 }), 2 } end
  OPS.unsqueeze = function() return { x2(), 1 } end
  OPS.svd = function() return { x2(), true } end
  OPS.tensordot = function() return { x2(), ember.randn({ 3, 2 }), 1 } end
  OPS.tile = function() return { x2(), { 2, 1 } } end
  OPS.topk = function() return { x2(), 2, { dim = 2 } } end
  OPS.transpose = function() return { x2(), 1, 2 } end
  OPS.unique = function() return { ints(), { sorted = true } } end
  OPS.where = function() return { x2():gt(0), x2(), x2() } end

  for op, make in pairs(OPS) do
    if rawget(ember, op) then calls["ember." .. op] = make end
    if rawget(ember.Tensor, op) then calls["Tensor:" .. op] = make end
  end
  -- the method's receiver is not the function's first argument
  calls["Tensor:where"] = function() return { x2(), x2():gt(0), x2() } end

  -- methods only
  for m in ("abs_ cos_ exp_ neg_ relu_ sigmoid_ sign_ silu_ sin_ tanh_ erf_ mish_ zero_ bool cpu double float half "
    .. "int long data_ptr dim is_contiguous is_pinned numel shape stride t type version tolist grad_fn "
    .. "free"):gmatch("%S+") do
    calls["Tensor:" .. m] = function() return { x2() } end
  end
  for m in ("log_ log1p_ rsqrt_ sqrt_ digamma_ lgamma_ trigamma_"):gmatch("%S+") do
    calls["Tensor:" .. m] = function() return { pos() } end
  end
  for m in ("add_ sub_ mul_ div_ copy_ expand_as reshape_as view_as"):gmatch("%S+") do
    calls["Tensor:" .. m] = function() return { x2(), x2() } end
  end
  calls["Tensor:fill_"] = function() return { x2(), 1 } end
  calls["ember.polygamma"] = function() return { 1, pos() } end
  calls["Tensor:polygamma"] = function() return { pos(), 1 } end
  calls["Tensor:item"] = function() return { ember.tensor(3) } end
  calls["Tensor:size"] = function() return { x2(), 1 } end
  calls["Tensor:sum_to"] = function() return { x2(), { 1, 3 } } end
  calls["Tensor:register_hook"] = function()
    local w = ember.randn({ 2 })
    ember.autodiff.GradManager():attach({ w })
    return { w, function() end }
  end
  calls["Tensor:register_post_accumulate_grad_hook"] = calls["Tensor:register_hook"]

  -- ember.linalg
  for op in ("cholesky det inv slogdet svdvals eigvalsh"):gmatch("%S+") do
    calls["ember.linalg." .. op] = function() return { spd() } end
  end
  calls["ember.linalg.eigh"] = function() return { spd(), "L" } end
  calls["ember.linalg.eigvalsh"] = calls["ember.linalg.eigh"]
  calls["ember.linalg.lstsq"] = OPS.lstsq
  calls["ember.linalg.solve"] = OPS.lstsq
  calls["ember.linalg.norm"] = function() return { x2(), 2, 2, true } end
  calls["ember.linalg.qr"] = OPS.qr
  calls["ember.linalg.svd"] = function() return { x2(), { full_matrices = false } } end
  local function lu_of() return ember.linalg.lu_factor(spd()) end
  calls["ember.lu_unpack"] = function() local LU, piv = lu_of() return { LU, piv } end
  for _, name in ipairs({ "ember.matrix_power", "ember.linalg.matrix_power", "Tensor:matrix_power" }) do
    calls[name] = function() return { spd(), 2 } end
  end
  calls["ember.pinverse"] = function() return { x2(), 1e-15 } end
  calls["Tensor:pinverse"] = calls["ember.pinverse"]
  calls["ember.linalg.pinv"] = function() return { x2(), { rtol = 1e-12 } } end
  calls["ember.linalg.matrix_rank"] = calls["ember.linalg.pinv"]
  calls["ember.linalg.cholesky_ex"] = function() return { spd(), { upper = false } } end
  calls["ember.linalg.inv_ex"] = function() return { spd(), { check_errors = false } } end
  calls["ember.linalg.solve_ex"] = function() return { spd(), ember.randn({ 3, 2 }), { check_errors = false } } end
  calls["ember.linalg.cond"] = function() return { spd(), 2 } end
  calls["ember.linalg.cross"] = function() return { ember.randn({ 2, 3 }), ember.randn({ 2, 3 }), 2 } end
  calls["ember.linalg.diagonal"] = function() return { x2(), 0 } end
  calls["ember.linalg.householder_product"] = function() return { ember.randn({ 4, 3 }), ember.rand({ 3 }) } end
  calls["ember.linalg.lu"] = function() return { spd(), { pivot = true } } end
  calls["ember.linalg.lu_factor"] = calls["ember.linalg.lu"]
  calls["ember.linalg.lu_factor_ex"] = calls["ember.linalg.lu"]
  calls["ember.linalg.lu_solve"] = function()
    local LU, piv = lu_of()
    return { LU, piv, ember.randn({ 3, 2 }), { left = true, adjoint = false } }
  end
  calls["ember.linalg.matrix_exp"] = function() return { spd() } end
  calls["ember.linalg.multi_dot"] = function() return { { x2(), ember.randn({ 3, 2 }), ember.randn({ 2, 2 }) } } end
  calls["ember.linalg.vecdot"] = function() return { x2(), x2(), 2 } end
  calls["ember.linalg.tensorinv"] = function() return { ember.eye(4):reshape({ 4, 2, 2 }), 1 } end
  calls["ember.linalg.tensorsolve"] = function() return { ember.eye(4):reshape({ 2, 2, 4 }), ember.randn({ 2, 2 }) } end
  calls["ember.linalg.vander"] = function() return { t3(), { N = 3 } } end
  calls["ember.linalg.vector_norm"] = function() return { x2(), 2, 2, true } end
  calls["ember.linalg.matrix_norm"] = function() return { x2(), "fro", { 1, 2 }, true } end
  calls["ember.linalg.solve_triangular"] = function() return { spd(), ember.randn({ 3, 2 }), { upper = true } } end

  -- the runtime: queries and settings (each set to what it is)
  for f in ("blas_info clock conv_kernels_enabled dnnl_enabled dnnl_info dnnl_matmul_enabled empty_cache get_autocast_dtype "
    .. "get_num_threads is_autocast_enabled is_deterministic is_grad_enabled reset_peak_memory thread_stats "
    .. "version"):gmatch("%S+") do
    calls["ember." .. f] = function() return {} end
  end
  calls["ember.memory_stats"] = function() return { "cpu" } end
  calls["ember.keep"] = function() return { ember.ones({ 2 }) } end
  calls["ember.is_tensor"] = function() return { 5 } end
  calls["ember.help"] = function() return { "ember.nn.functional.some_missing_name" } end
  calls["ember.set_deterministic"] = function() return { ember.is_deterministic() } end
  calls["ember.set_dnnl_enabled"] = function() return { ember.dnnl_enabled() } end
  calls["ember.set_dnnl_matmul_enabled"] = function() return { ember.dnnl_matmul_enabled() } end
  calls["ember.set_conv_kernels_enabled"] = function() return { ember.conv_kernels_enabled() } end
  calls["ember.set_grad_enabled"] = function() return { ember.is_grad_enabled() } end
  calls["ember.set_num_threads"] = function() return { ember.get_num_threads() } end
  calls["ember.set_memory_limit"] = function() return { 0 } end
  -- DTR: a budget no test reaches (what disable leaves is as before)
  calls["ember.dtr.enable"] = function() return { { budget = 2 ^ 50 } } end
  for f in ("disable is_enabled stats"):gmatch("%S+") do calls["ember.dtr." .. f] = function() return {} end end
  calls["ember.amp.get_autocast_dtype"] = function() return {} end
  calls["ember.amp.is_autocast_enabled"] = function() return {} end
  for f in ("is_available device_count"):gmatch("%S+") do calls["ember.cuda." .. f] = function() return {} end end
  calls["ember.loader.candidates"] = function() return {} end
  calls["ember.loader.loaded"] = function() return {} end

  -- io, json, plot, progress
  local function saved()
    local path = os.tmpname()
    ember.save(path, { a = t3() })
    return path
  end
  calls["ember.save"] = function() return { os.tmpname(), { a = t3() }, { note = "x" } } end
  calls["ember.io.save"] = calls["ember.save"]
  calls["ember.io.load"] = function() return { saved(), {} } end
  calls["ember.io.header"] = function() return { saved() } end
  calls["ember.io.json.decode"] = function() return { "[1, 2]" } end
  calls["ember.io.json.encode"] = function() return { { 1, 2 } } end
  calls["ember.io.json.encode_string"] = function() return { "a" } end
  calls["ember.io.json.valid_utf8"] = function() return { "a" } end
  calls["ember.plot.escape"] = function() return { "<a>" } end
  calls["ember.plot.ticks"] = function() return { 0, 1, 5, 0.1 } end
  calls["ember.progress.columns"] = function() return { 1 } end
  calls["ember.progress.isatty"] = function() return { 1 } end
  calls["ember.progress.format_time"] = function() return { 61 } end
  calls["ember.progress.now"] = function() return {} end
  local function bar() return ember.progress.new(3, { file = io.open("/dev/null", "w") }) end
  calls["ember.progress"] = function() return { 3, { file = io.open("/dev/null", "w") } } end
  calls["Bar:update"] = function() return { bar(), 1, { loss = 1 } } end
  calls["Bar:set_postfix"] = function() return { bar(), { loss = 1 } } end
  calls["Bar:set_description"] = function() return { bar(), "train" } end
  calls["Bar:line"] = function() return { bar() } end
  calls["Bar:close"] = function() return { bar() } end

  -- data
  local function ds() return ember.data.TensorDataset(ember.zeros({ 4, 2 }), ember.zeros({ 4 })) end
  local function loader() return ember.data.DataLoader(ds(), { batch_size = 2 }) end
  calls["ember.data.TensorDataset"] = function() return { ember.zeros({ 4, 2 }), ember.zeros({ 4 }) } end
  calls["ember.data.permutation"] = function() return { 5, 1, 1 } end
  calls["TensorDataset:get"] = function() return { ds(), 1 } end
  calls["TensorDataset:size"] = function() return { ds() } end
  calls["DataLoader:iter"] = function() return { loader() } end
  calls["DataLoader:set_epoch"] = function() return { loader(), 2 } end
  calls["DataLoader:size"] = function() return { loader() } end

  -- optim
  local function params() return lin():parameters() end
  local function sgd() return ember.optim.SGD(params(), { lr = 0.1 }) end
  local function sched() return ember.optim.lr_scheduler.StepLR(sgd(), { step_size = 2 }) end
  calls["ember.optim.clip_grad_norm"] = function() return { params(), 1.0, 2 } end
  calls["ember.optim.clip_grad_value"] = function() return { params(), 1.0 } end
  calls["Optimizer:step"] = function() return { sgd(), function() return 0 end } end
  calls["Optimizer:zero_grad"] = function() return { sgd(), true } end
  calls["Optimizer:add_param_group"] = function() return { sgd(), { params = { t3() }, lr = 0.01 } } end
  calls["Optimizer:state_dict"] = function() return { sgd() } end
  calls["Optimizer:load_state_dict"] = function() local o = sgd() return { o, o:state_dict() } end
  calls["LRScheduler:step"] = function() return { sched() } end
  calls["LRScheduler:get_last_lr"] = function() return { sched() } end
  calls["LRScheduler:state_dict"] = function() return { sched() } end
  calls["LRScheduler:load_state_dict"] = function() local s = sched() return { s, s:state_dict() } end

  -- autodiff
  local A = ember.autodiff
  local function f64(s) return ember.randn(s or { 2 }, { dtype = "float64" }) end
  local function sq(a) return (a * a):sum() end
  calls["ember.autodiff.Function"] = function()
    return { { name = "double_it", forward = function(ctx, a) return a * 2 end,
      backward = function(ctx, g) return g * 2 end } }
  end
  calls["ember.autodiff.GradManager"] = function() return {} end
  calls["ember.autodiff.grad"] = function() return { sq, 1 } end
  calls["ember.autodiff.group"] = function() return { { A.GradManager() } } end
  calls["ember.autodiff.hessian"] = function() return { sq, f64() } end
  calls["ember.autodiff.jacobian"] = function() return { function(a) return a * 2 end, f64() } end
  calls["ember.autodiff.hvp"] = function() return { sq, f64(), f64() } end
  calls["ember.autodiff.vhp"] = calls["ember.autodiff.hvp"]
  calls["ember.autodiff.jvp"] = function() return { function(a) return a * 2 end, f64(), f64() } end
  calls["ember.autodiff.vjp"] = calls["ember.autodiff.jvp"]
  calls["ember.autodiff.is_debug"] = function() return {} end
  calls["ember.autodiff.set_debug"] = function() return { A.is_debug() } end
  calls["ember.autodiff.stats"] = function() return {} end
  calls["ember.autodiff.register_grad_rule"] = function()
    return { "abs", function(ctx, g) return ctx.inputs[1]:sign() * g end }
  end
  calls["ember.autodiff.graph.increment_version"] = function() return { t3() } end
  local function gm() local m = A.GradManager() m:attach({ t3() }) return m end
  -- a manager recording, and a loss on its graph
  local function recorded()
    local m, w = A.GradManager(), t3()
    m:attach({ w })
    m:record()
    return m, (w * w):sum()
  end
  calls["ember.autodiff.graph.get_gradient_edge"] = function() local _, y = recorded() return { y } end
  calls["GradManager:new"] = function() return { A.GradManager } end
  calls["GradManager:attach"] = function() return { A.GradManager(), { t3() }, {} } end
  calls["GradManager:attached_tensors"] = function() return { gm() } end
  calls["GradManager:is_attached"] = function() return { gm(), t3() } end
  calls["GradManager:is_recording"] = function() return { gm() } end
  calls["GradManager:record"] = function() return { gm() } end
  calls["GradManager:release"] = function() return { gm() } end
  calls["GradManager:backward"] = function() local m, y = recorded() return { m, y, ember.tensor(1) } end
  calls["GradManager:backward_steps"] = calls["GradManager:backward"]
  calls["GradManager:register_after_backward_callback"] = function() return { gm(), function() end } end
  calls["GradManager:register_before_backward_returns"] = calls["GradManager:register_after_backward_callback"]
  local function node() local _, y = recorded() return y:grad_fn() end
  for m in ("metadata name next_functions"):gmatch("%S+") do calls["Node:" .. m] = function() return { node() } end end
  calls["Node:register_hook"] = function() return { node(), function() end } end
  calls["Node:register_prehook"] = calls["Node:register_hook"]
  local function run()
    local m, y = recorded()
    return m:backward_steps(y)
  end
  calls["BackwardRun:step"] = function() return { run(), 1 } end
  calls["BackwardRun:is_done"] = function() return { run() } end
  calls["BackwardRun:cancel"] = function() return { run() } end

  -- amp
  local function scaler() return ember.amp.GradScaler({}) end
  for m in ("get_backoff_factor get_growth_factor get_growth_interval get_scale is_enabled state_dict"):gmatch("%S+") do
    calls["GradScaler:" .. m] = function() return { scaler() } end
  end
  calls["GradScaler:load_state_dict"] = function() local s = scaler() return { s, s:state_dict() } end
  calls["GradScaler:scale"] = function() return { scaler(), t3() } end
  calls["GradScaler:unscale_"] = function() return { scaler(), sgd() } end
  calls["GradScaler:update"] = function() return { scaler(), 1024 } end

  -- distributed: a world of one (no launcher) runs every call
  for f in ("is_available is_initialized is_nccl_available wtime init backend barrier local_rank rank "
    .. "world_size"):gmatch("%S+") do
    calls["ember.distributed." .. f] = function() return {} end
  end
  calls["ember.distributed.all_reduce"] = function() return { t3(), "sum", { async = false } } end
  calls["ember.distributed.broadcast"] = function() return { t3(), 0, { async = false } } end
  calls["ember.distributed.all_gather"] = function() return { t3(), { async = false } } end
  calls["ember.distributed.broadcast_parameters"] = function() return { lin(), 0 } end
  calls["ember.distributed.make_allreduce_cb"] = function() return { "mean", { bucket_mb = 1 } } end

  -- frame: a step run (one at a time: the run before is cancelled)
  local open
  local function step()
    if open then open:cancel() end
    open = ember.frame.step(function() return 1 end)
    return open
  end
  calls["StepRun:resume"] = function() return { step(), 1 } end
  for m in ("cancel is_done stats"):gmatch("%S+") do calls["StepRun:" .. m] = function() return { step() } end end
  calls["StepRun:results"] = function()
    local r = step()
    while not r:is_done() do r:resume(1) end
    return { r }
  end

  -- jit: a plan of x * 2 and its runs
  local function plan() return ember.jit.trace(function(x) return x * 2 end, { t3() }) end
  calls["ember.jit.trace"] = function() return { function(x) return x * 2 end, { t3() }, { train = true } } end
  calls["Plan:stats"] = function() return { plan() } end
  local plan_file = os.tmpname()
  calls["Plan:save"] = function() return { plan(), plan_file, { names = {} } } end
  calls["Plan:tensor"] = function()
    local w = t3()
    local p = ember.jit.trace(function(x) return x * w end, { t3() })
    p:save(plan_file, { names = { w = w } })
    return { ember.jit.load(plan_file), "w" }
  end
  calls["ember.jit.load"] = function()
    plan():save(plan_file)
    return { plan_file }
  end
  local function run() return plan():start(t3()) end
  calls["PlanRun:step"] = function() return { run(), 1 } end
  calls["PlanRun:cancel"] = function() return { run() } end
  calls["PlanRun:result"] = function()
    local r = run()
    while not r:step(1) do end
    return { r }
  end
  return calls
end
