-- ember.cuda: whether the run-time CUDA backend (libember_cuda.so) loaded and
-- how many devices it sees. Tensors move with t:cuda() / t:to("cuda:1").
local ffi = require("ffi")
local ember = require("ember")
local C = ember._C

local cuda = {}

function cuda.device_count() return C.ember_cuda_device_count() end
function cuda.is_available() return C.ember_cuda_device_count() > 0 end
-- why CUDA is not available ("available" when it is)
function cuda.status() return ffi.string(C.ember_cuda_status()) end

return cuda
