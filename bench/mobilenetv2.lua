-- bench/mobilenetv2.lua: MobileNetV2 as bench/convnets_torch.py builds it
-- (torchvision's layout), for bench/convnets.lua and bench/convnets_plan.lua:
--   local MobileNetV2 = require("mobilenetv2"); local model = MobileNetV2(10)
-- (package.path must reach spec/support/zoo.lua)
local ember = require("ember")
local Z = require("zoo")
local nn = ember.nn

local SETTINGS = { { 1, 16, 1, 1 }, { 6, 24, 2, 2 }, { 6, 32, 3, 2 }, { 6, 64, 4, 2 }, { 6, 96, 3, 1 },
  { 6, 160, 3, 2 }, { 6, 320, 1, 1 } }

-- zoo.lua's conv + batch norm (default options), ReLU6 after it unless act is false
local function conv_bn(layers, cin, cout, k, stride, groups, act)
  return Z.conv_bn(layers, cin, cout, k, stride, groups, act ~= false and nn.ReLU6 or nil)
end

-- zoo.lua's inverted residual (its forward: the block, plus x where use_res)
-- in torchvision's layout
local InvertedResidual = Z.InvertedResidual:extend("InvertedResidual")
function InvertedResidual:init(cin, cout, stride, t)
  local exp = cin * t
  local layers = t ~= 1 and conv_bn({}, cin, exp, 1) or {}
  conv_bn(layers, exp, exp, 3, stride, exp)   -- depthwise
  conv_bn(layers, exp, cout, 1, 1, 1, false)  -- linear projection
  self.block = nn.Sequential(unpack(layers))
  self.use_res = stride == 1 and cin == cout
end

local MobileNetV2 = nn.Module:extend("MobileNetV2")
function MobileNetV2:init(num_classes)
  local layers, cin = conv_bn({}, 3, 32, 3, 2), 32
  for _, s in ipairs(SETTINGS) do
    local t, c, n, stride = unpack(s)
    for i = 1, n do
      layers[#layers + 1] = InvertedResidual(cin, c, i == 1 and stride or 1, t)
      cin = c
    end
  end
  conv_bn(layers, cin, 1280, 1)
  self.features = nn.Sequential(unpack(layers))
  self.avgpool = nn.AdaptiveAvgPool2d(1)
  self.classifier = nn.Linear(1280, num_classes)
end
function MobileNetV2:forward(x)
  return self.classifier(self.avgpool(self.features(x)):flatten(2))
end

return MobileNetV2
