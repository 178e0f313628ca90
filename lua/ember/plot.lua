-- ember.plot.svg(path, series, opts): a line plot of one or more named series
-- of numbers (loss and accuracy curves) as a standalone SVG file: axes with
-- round ticks and labels, a grid, a legend where no line passes, a title, and
-- a second y axis on the right for series that have their own scale. No
-- dependencies, no fonts beyond the viewer's sans-serif. Not a charting
-- library: lines only.
--
--   ember.plot.svg("curves.svg", {
--     { name = "train loss", values = losses },
--     { name = "test accuracy", values = accs, axis = "right" },
--   }, { title = "Fashion-MNIST", xlabel = "epoch" })
--
-- series: {name = {y...}} (drawn in name order), or a list of
-- {name =, y = {...} (or values =), x = {...}?, axis = "left" or "right"?},
-- or one plain list of numbers. x defaults to 1..#y. Non-finite values break
-- a line. opts: title, xlabel, ylabel, y2label, width (640), height (400),
-- logy (the left axis), xmin, xmax, ymin, ymax, y2min, y2max, colors.
-- With path nil the SVG text is only returned.
local format, floor, ceil, concat = string.format, math.floor, math.ceil, table.concat
local min, max, abs = math.min, math.max, math.abs
local log10 = function(v) return math.log(v) / math.log(10) end

local P = {}

P.COLORS = { "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
  "#7f7f7f", "#bcbd22", "#17becf" }

local function esc(s)
  return (tostring(s):gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;",
    ['"'] = "&quot;", ["'"] = "&apos;" }))
end
P.escape = esc

local function finite(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
end

local errors = require("ember.errors")
local function fail(msg) errors.fail("plot.svg", msg) end

local function as_list(v, what)
  if type(v) == "table" and getmetatable(v) and v.tolist and v.dim then   -- a tensor
    if v:dim() ~= 1 then fail(what .. " must be 1-D, got " .. v:dim() .. " dims") end
    return v:tolist()
  end
  if type(v) ~= "table" then fail(what .. " must be a list of numbers, got " .. type(v)) end
  return v
end

-- normalises the accepted forms into a list of {name, x, y}
local function normalise(series, opts)
  if type(series) ~= "table" then fail("series must be a table, got " .. type(series)) end
  local list = {}
  if type(series[1]) == "number" or (getmetatable(series) and series.tolist) then
    list[1] = { name = opts.name or "series", y = as_list(series, "series"), axis = "left" }
  elseif type(series[1]) == "table" and (series[1].y or series[1].values) then
    for i, s in ipairs(series) do
      local y = as_list(s.y or s.values, "series " .. i)
      list[i] = { name = s.name or ("series " .. i), y = y,
        x = s.x and as_list(s.x, "x of series " .. i), axis = s.axis or "left" }
    end
  else
    local names = {}
    for k in pairs(series) do
      if type(k) ~= "string" then fail("series names must be strings, got " .. type(k)) end
      names[#names + 1] = k
    end
    table.sort(names)
    for i, k in ipairs(names) do
      list[i] = { name = k, y = as_list(series[k], "series '" .. k .. "'"), axis = "left" }
    end
  end
  if #list == 0 then fail("no series to plot") end
  for _, s in ipairs(list) do
    if s.axis ~= "left" and s.axis ~= "right" then
      fail(("series '%s': axis must be \"left\" or \"right\", got %s"):format(s.name, tostring(s.axis)))
    end
    if s.x and #s.x ~= #s.y then
      fail(("series '%s' has %d x values and %d y values"):format(s.name, #s.x, #s.y))
    end
    for i = 1, #s.y do
      if type(s.y[i]) ~= "number" then
        fail(("series '%s': value %d is a %s, not a number"):format(s.name, i, type(s.y[i])))
      end
    end
  end
  return list
end

-- Round tick positions covering [lo, hi]: about n steps of 1, 2 or 5 x 10^k,
-- and at least min_step (1 for integer data such as epochs: no tick at 1.5).
function P.ticks(lo, hi, n, min_step)
  n = n or 5
  for i, v in ipairs({ lo, hi, n, min_step or 0 }) do
    if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
      errors.fail("plot.ticks", ("expected finite numbers (lo, hi, n, min_step), got %s as argument %d")
        :format(errors.show(v), i))
    end
  end
  local span = hi - lo
  if span <= 0 then span = abs(lo) > 0 and abs(lo) or 1 end
  local raw = span / n
  local mag = 10 ^ floor(log10(raw))
  local step = mag
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    step = m * mag
    if step >= raw then break end
  end
  step = max(step, min_step or 0)
  local first, last = floor(lo / step + 1e-9), ceil(hi / step - 1e-9)
  local ticks = {}
  for k = first, last do ticks[#ticks + 1] = k * step end
  local decimals = max(0, -floor(log10(step) + 1e-9))
  return ticks, step, decimals
end

local function tick_label(v, decimals)
  if abs(v) < 1e-12 then v = 0 end
  if abs(v) >= 1e6 or (abs(v) < 1e-4 and v ~= 0) then return format("%.3g", v) end
  return format(format("%%.%df", decimals), v)
end

-- log10 of the powers of ten covering [lo, hi] (in log10), with 2 and 5 times
-- them when the range spans at most two decades
local function log_ticks(lo, hi)
  local ticks = {}
  for k = floor(lo + 1e-9), ceil(hi - 1e-9) do
    for _, m in ipairs(hi - lo <= 2 and { 1, 2, 5 } or { 1 }) do ticks[#ticks + 1] = k + log10(m) end
  end
  return ticks
end

-- where v goes on an axis (log10 of it on a log axis), or nil if it cannot be drawn
local function coord(v, log)
  if not finite(v) or (log and v <= 0) then return nil end
  return log and log10(v) or v
end

-- An axis over the data range [lo, hi] (lo > hi: no data). a: name ("x",
-- "y", "y2"), min and max (the user's bounds), log, integer (data are whole
-- numbers), n (about how many ticks), snap (widen to the outer ticks).
-- Returns {lo, hi, ticks, labels}, in coordinates (log10 on a log axis).
local function make_axis(lo, hi, a)
  if lo > hi then lo, hi = 0, 1 end
  for _, k in ipairs({ "min", "max" }) do
    if a[k] ~= nil then
      local c = coord(a[k], a.log)
      if not c then fail(("%s%s must be a %snumber, got %s"):format(a.name, k, a.log and "positive " or "",
        tostring(a[k]))) end
      if k == "min" then lo = c else hi = c end
    end
  end
  if hi < lo then fail(("%smin %s is above %smax %s"):format(a.name, a.min, a.name, a.max)) end
  if hi == lo then
    local d = (a.integer or lo == 0) and 1 or abs(lo) * 0.1
    lo, hi = lo - d, hi + d
  end
  local ticks, decimals
  if a.log then
    ticks = log_ticks(lo, hi)
  else
    ticks, _, decimals = P.ticks(lo, hi, a.n, a.integer and 1 or nil)
  end
  local eps = 1e-9 * (hi - lo)
  if a.snap then   -- out to the nearest ticks
    local below, above = lo, hi
    for i = #ticks, 1, -1 do if ticks[i] >= hi - eps then above = ticks[i] end end
    for _, t in ipairs(ticks) do if t <= lo + eps then below = t end end
    if a.min == nil then lo = below end
    if a.max == nil then hi = above end
  end
  local axis = { lo = lo, hi = hi, ticks = {}, labels = {} }
  for _, t in ipairs(ticks) do
    if t >= lo - eps and t <= hi + eps then
      axis.ticks[#axis.ticks + 1] = t
      axis.labels[#axis.labels + 1] = a.log and tick_label(10 ^ t, max(0, -floor(t + 1e-9)))
        or tick_label(t, decimals)
    end
  end
  return axis
end

-- each series' points as {x, y} coordinates, false where the line breaks
local function to_coords(list, opts)
  for _, s in ipairs(list) do
    local log = s.axis == "left" and opts.logy
    s.pts = {}
    for i = 1, #s.y do
      local x, y = coord(s.x and s.x[i] or i, false), coord(s.y[i], log)
      s.pts[i] = x and y and { x, y } or false
    end
  end
end

-- the range of coordinate k (1: x, 2: y) over the series on `side` (nil: all),
-- and whether every value is a whole number
local function extent(list, k, side)
  local lo, hi, integer = math.huge, -math.huge, true
  for _, s in ipairs(list) do
    if side == nil or s.axis == side then
      for _, p in ipairs(s.pts) do
        if p then
          lo, hi = min(lo, p[k]), max(hi, p[k])
          integer = integer and p[k] == floor(p[k])
        end
      end
    end
  end
  return lo, hi, integer
end

local function names_on(list, side)
  local names = {}
  for _, s in ipairs(list) do
    if s.axis == side then names[#names + 1] = s.name end
  end
  return names
end

-- pixel positions in `area` for x and for y on axis a
local function scales(area, xa)
  return function(x) return area.x + (x - xa.lo) / (xa.hi - xa.lo) * area.w end,
    function(a, y) return area.y + area.h - (y - a.lo) / (a.hi - a.lo) * area.h end
end

-- each series' unbroken runs of points, in pixels
local function project(list, ya, sx, sy)
  for _, s in ipairs(list) do
    local run
    s.runs = {}
    for _, p in ipairs(s.pts) do
      if p then
        if not run then run = {}; s.runs[#s.runs + 1] = run end
        run[#run + 1] = { sx(p[1]), sy(ya[s.axis], p[2]) }
      else
        run = nil
      end
    end
  end
end

-- does the segment p-q (a point when p == q) pass through box {x, y, w, h}?
-- (Liang-Barsky: clip the segment's parameter range to each side in turn)
local function crosses(box, p, q)
  local t0, t1 = 0, 1
  local dx, dy = q[1] - p[1], q[2] - p[2]
  for _, side in ipairs({ { -dx, p[1] - box.x }, { dx, box.x + box.w - p[1] },
    { -dy, p[2] - box.y }, { dy, box.y + box.h - p[2] } }) do
    local d, room = side[1], side[2]
    if d == 0 then
      if room < 0 then return false end
    else
      local t = room / d
      if d < 0 then t0 = max(t0, t) else t1 = min(t1, t) end
      if t0 > t1 then return false end
    end
  end
  return true
end

local function box_is_free(box, list)
  local pad = { x = box.x - 4, y = box.y - 4, w = box.w + 8, h = box.h + 8 }
  for _, s in ipairs(list) do
    for _, run in ipairs(s.runs) do
      for i = 1, #run do
        if crosses(pad, run[i], run[i + 1] or run[i]) then return false end
      end
    end
  end
  return true
end

-- a place inside the plot area, corners first, that no line crosses, or nil
local function legend_inside(list, area, w, h)
  local l, r, c = area.x + 8, area.x + area.w - w - 8, area.x + (area.w - w) / 2
  local t, b, m = area.y + 8, area.y + area.h - h - 8, area.y + (area.h - h) / 2
  for _, xy in ipairs({ { r, t }, { l, t }, { r, b }, { l, b }, { c, t }, { c, b }, { r, m }, { l, m } }) do
    local box = { x = xy[1], y = xy[2], w = w, h = h }
    if box_is_free(box, list) then return box end
  end
end

-- the y axes by side ("left", "right"), each with its label and series names,
-- and the sides that have series, in order
local function y_axes(list, opts)
  local ya, sides = {}, {}
  for _, side in ipairs({ "left", "right" }) do
    local names = names_on(list, side)
    if #names > 0 then
      local key = side == "left" and "y" or "y2"
      local lo, hi = extent(list, 2, side)
      ya[side] = make_axis(lo, hi, { name = key, min = opts[key .. "min"], max = opts[key .. "max"],
        log = side == "left" and opts.logy, n = 5, snap = true })
      ya[side].label = opts[key .. "label"] or concat(names, ", ")
      ya[side].names = names
      sides[#sides + 1] = side
    end
  end
  return ya, sides
end

-- The plot area, its scales, and the legend's box: inside the area where no
-- line passes, else right of the area, which narrows to make room. Projects
-- the series (s.runs) for the area chosen.
local function layout(p)
  local lw = 0
  for _, s in ipairs(p.list) do lw = max(lw, #tostring(s.name)) end
  lw, p.lh = lw * 7 + 40, #p.list * 18 + 8
  local margin_right = p.ya.right and 70 or 20
  local area = { x = 70, y = p.opts.title and 40 or 20 }
  area.w, area.h = p.W - area.x - margin_right, p.H - area.y - (p.opts.xlabel and 50 or 35)
  p.area, p.sx, p.sy = area, scales(area, p.xa)
  project(p.list, p.ya, p.sx, p.sy)
  p.legend = legend_inside(p.list, area, lw, p.lh)
  if not p.legend then
    p.legend = { x = p.W - lw - 8, y = area.y, w = lw, h = p.lh }
    area.w = p.legend.x - margin_right - area.x
    p.sx, p.sy = scales(area, p.xa)
    project(p.list, p.ya, p.sx, p.sy)
  end
end

-- grid, axis lines, ticks, axis labels and title
local function draw_frame(add, p)
  local area, sx, sy, xa = p.area, p.sx, p.sy, p.xa
  local right, bottom = area.x + area.w, area.y + area.h
  if p.opts.title then
    add('<text x="%.1f" y="24" text-anchor="middle" font-size="16" font-weight="bold">%s</text>',
      area.x + area.w / 2, esc(p.opts.title))
  end
  -- the grid follows the x ticks and the first y axis' ticks
  add('<g class="grid" stroke="#e0e0e0" stroke-width="1">')
  for _, v in ipairs(xa.ticks) do
    add('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d"/>', sx(v), area.y, sx(v), bottom)
  end
  local ga = p.ya[p.sides[1]]
  for _, v in ipairs(ga.ticks) do
    add('<line x1="%d" y1="%.2f" x2="%.2f" y2="%.2f"/>', area.x, sy(ga, v), right, sy(ga, v))
  end
  add("</g>")
  add('<g class="axes" stroke="black" stroke-width="1">')
  add('<line x1="%d" y1="%d" x2="%.2f" y2="%d"/>', area.x, bottom, right, bottom)
  add('<line x1="%d" y1="%d" x2="%d" y2="%d"/>', area.x, area.y, area.x, bottom)
  if p.ya.right then add('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d"/>', right, area.y, right, bottom) end
  add("</g>")
  add('<g class="xticks" text-anchor="middle">')
  for i, v in ipairs(xa.ticks) do
    add('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="black"/>', sx(v), bottom, sx(v), bottom + 5)
    add('<text x="%.2f" y="%d">%s</text>', sx(v), bottom + 18, esc(xa.labels[i]))
  end
  add("</g>")
  if p.opts.xlabel then
    add('<text class="xlabel" x="%.1f" y="%d" text-anchor="middle">%s</text>', area.x + area.w / 2, p.H - 10,
      esc(p.opts.xlabel))
  end
  for _, side in ipairs(p.sides) do
    local a, left = p.ya[side], side == "left"
    local x0, dir = left and area.x or right, left and -1 or 1
    add('<g class="%s" text-anchor="%s">', left and "yticks" or "y2ticks", left and "end" or "start")
    for i, v in ipairs(a.ticks) do
      local y = sy(a, v)
      add('<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="black"/>', x0, y, x0 + 5 * dir, y)
      add('<text x="%.2f" y="%.2f" dy="0.35em">%s</text>', x0 + 8 * dir, y, esc(a.labels[i]))
    end
    add("</g>")
    -- with two axes, the label of an axis with one series takes its colour
    local color = "black"
    for _, s in ipairs(p.list) do
      if #p.sides == 2 and #a.names == 1 and s.axis == side then color = s.color end
    end
    local lx, ly = left and 16 or right + 60, area.y + area.h / 2
    add('<text class="%s" x="%.1f" y="%.1f" text-anchor="middle" fill="%s" '
      .. 'transform="rotate(%d %.1f %.1f)">%s</text>',
      left and "ylabel" or "y2label", lx, ly, color, left and -90 or 90, lx, ly, esc(a.label))
  end
end

-- one polyline per unbroken run of points (and a circle for a lone point),
-- clipped to the plot area
local function draw_series(add, list)
  add('<g class="series" fill="none" stroke-width="1.5" stroke-linejoin="round" '
    .. 'clip-path="url(#ember-plot-area)">')
  for _, s in ipairs(list) do
    add('<g class="line" stroke="%s" data-name="%s" data-axis="%s"><title>%s</title>', s.color, esc(s.name),
      s.axis, esc(s.name))
    for _, run in ipairs(s.runs) do
      local pts = {}
      for i, pt in ipairs(run) do pts[i] = format("%.2f,%.2f", pt[1], pt[2]) end
      if #run == 1 then
        add('<circle cx="%.2f" cy="%.2f" r="2.5" fill="%s" stroke="none"/>', run[1][1], run[1][2], s.color)
      end
      add('<polyline points="%s"/>', concat(pts, " "))
    end
    add("</g>")
  end
  add("</g>")
end

local function draw_legend(add, list, box)
  add('<g class="legend">')
  add('<rect x="%.1f" y="%.1f" width="%d" height="%d" fill="white" fill-opacity="0.85" stroke="#bbbbbb"/>',
    box.x, box.y, box.w, box.h)
  for k, s in ipairs(list) do
    local y = box.y + 4 + (k - 1) * 18 + 9
    add('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>',
      box.x + 6, y, box.x + 26, y, s.color)
    add('<text x="%.1f" y="%.1f" dy="0.35em">%s</text>', box.x + 32, y, esc(s.name))
  end
  add("</g>")
end

function P.svg(path, series, opts)
  opts = opts or {}
  require("ember.errors").known_options("plot.svg", opts, { "title", "xlabel", "ylabel", "y2label", "width",
    "height", "logy", "xmin", "xmax", "ymin", "ymax", "y2min", "y2max", "colors", "name" })
  if path ~= nil and type(path) ~= "string" then
    fail("path must be a string or nil, got " .. type(path))
  end
  local list = normalise(series, opts)
  to_coords(list, opts)
  local colors = opts.colors or P.COLORS
  for k, s in ipairs(list) do s.color = colors[(k - 1) % #colors + 1] end
  local xlo, xhi, xint = extent(list, 1)
  local p = { list = list, opts = opts, W = opts.width or 640, H = opts.height or 400,
    xa = make_axis(xlo, xhi, { name = "x", min = opts.xmin, max = opts.xmax, integer = xint, n = 6 }) }
  p.ya, p.sides = y_axes(list, opts)
  layout(p)

  local o = {}
  local function add(...) o[#o + 1] = format(...) end
  add('<?xml version="1.0" encoding="UTF-8"?>')
  add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
    .. 'font-family="sans-serif" font-size="12">', p.W, p.H, p.W, p.H)
  add('<defs><clipPath id="ember-plot-area"><rect x="%d" y="%d" width="%.2f" height="%d"/></clipPath></defs>',
    p.area.x, p.area.y, p.area.w, p.area.h)
  add('<rect x="0" y="0" width="%d" height="%d" fill="white"/>', p.W, p.H)
  draw_frame(add, p)
  draw_series(add, list)
  draw_legend(add, list, p.legend)
  add("</svg>")
  local text = concat(o, "\n") .. "\n"

  if path then
    local f, err = io.open(path, "w")
    if not f then fail(path .. ": cannot open: " .. tostring(err)) end
    local ok, werr = f:write(text)
    f:close()
    if not ok then fail(path .. ": write failed: " .. tostring(werr)) end
  end
  return text
end

return P
