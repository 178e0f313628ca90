-- ember.plot.svg(path, series, opts): a line plot of one or more named series
-- of numbers (loss and accuracy curves) as a standalone SVG file: axes with
-- round ticks, a grid, a legend and a title. No dependencies, no fonts beyond
-- the viewer's sans-serif. Not a charting library: lines only.
--
--   ember.plot.svg("curves.svg", { loss = losses, ["test acc"] = accs },
--                  { title = "Fashion-MNIST", xlabel = "epoch", ylabel = "value" })
--
-- series: {name = {y...}} (drawn in name order), or a list of
-- {name =, y = {...} (or values =), x = {...}?}, or one plain list of numbers.
-- x defaults to 1..#y. Non-finite values break a line. opts: title, xlabel,
-- ylabel, width (640), height (400), logy, xmin, xmax, ymin, ymax, colors.
-- With path nil the SVG text is only returned.
local format, floor, concat = string.format, math.floor, table.concat
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

local function fail(msg, level) error("ember.plot.svg: " .. msg, (level or 1) + 1) end

local function as_list(v, what)
  if type(v) == "table" and getmetatable(v) and v.tolist and v.dim then   -- a tensor
    if v:dim() ~= 1 then fail(what .. " must be 1-D, got " .. v:dim() .. " dims", 4) end
    return v:tolist()
  end
  if type(v) ~= "table" then fail(what .. " must be a list of numbers, got " .. type(v), 4) end
  return v
end

-- normalises the accepted forms into a list of {name, x, y}
local function normalise(series, opts)
  if type(series) ~= "table" then fail("series must be a table, got " .. type(series), 3) end
  local list = {}
  if type(series[1]) == "number" or (getmetatable(series) and series.tolist) then
    list[1] = { name = opts.name or "series", y = as_list(series, "series") }
  elseif type(series[1]) == "table" and (series[1].y or series[1].values) then
    for i, s in ipairs(series) do
      local y = as_list(s.y or s.values, "series " .. i)
      list[i] = { name = s.name or ("series " .. i), y = y,
        x = s.x and as_list(s.x, "x of series " .. i) }
    end
  else
    local names = {}
    for k in pairs(series) do
      if type(k) ~= "string" then fail("series names must be strings, got " .. type(k), 3) end
      names[#names + 1] = k
    end
    table.sort(names)
    for i, k in ipairs(names) do
      list[i] = { name = k, y = as_list(series[k], "series '" .. k .. "'") }
    end
  end
  if #list == 0 then fail("no series to plot", 3) end
  for _, s in ipairs(list) do
    if s.x and #s.x ~= #s.y then
      fail(("series '%s' has %d x values and %d y values"):format(s.name, #s.x, #s.y), 3)
    end
    for i = 1, #s.y do
      if type(s.y[i]) ~= "number" then
        fail(("series '%s': value %d is a %s, not a number"):format(s.name, i, type(s.y[i])), 3)
      end
    end
  end
  return list
end

-- round tick positions covering [lo, hi]: about n steps of 1, 2 or 5 x 10^k
function P.ticks(lo, hi, n)
  n = n or 5
  local span = hi - lo
  if span <= 0 then span = math.abs(lo) > 0 and math.abs(lo) or 1 end
  local raw = span / n
  local mag = 10 ^ floor(log10(raw))
  local step = mag
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    step = m * mag
    if step >= raw then break end
  end
  local first, last = floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
  local ticks = {}
  for k = first, last do ticks[#ticks + 1] = k * step end
  local decimals = math.max(0, -floor(log10(step) + 1e-9))
  return ticks, step, decimals
end

local function tick_label(v, decimals)
  if math.abs(v) < 1e-12 then v = 0 end
  if math.abs(v) >= 1e6 or (math.abs(v) < 1e-4 and v ~= 0) then return format("%.3g", v) end
  return format(format("%%.%df", decimals), v)
end

function P.svg(path, series, opts)
  opts = opts or {}
  if path ~= nil and type(path) ~= "string" then
    fail("path must be a string or nil, got " .. type(path), 2)
  end
  local list = normalise(series, opts)
  local W, H = opts.width or 640, opts.height or 400
  local logy = opts.logy
  local ml, mr, mt, mb = 70, 20, opts.title and 40 or 20, opts.xlabel and 50 or 35
  local pw, ph = W - ml - mr, H - mt - mb

  -- data ranges over finite points (log: positive ones)
  local xmin, xmax, ymin, ymax = math.huge, -math.huge, math.huge, -math.huge
  for _, s in ipairs(list) do
    for i = 1, #s.y do
      local x, y = s.x and s.x[i] or i, s.y[i]
      if finite(x) and finite(y) and (not logy or y > 0) then
        if logy then y = log10(y) end
        xmin, xmax = math.min(xmin, x), math.max(xmax, x)
        ymin, ymax = math.min(ymin, y), math.max(ymax, y)
      end
    end
  end
  if xmin > xmax then xmin, xmax, ymin, ymax = 0, 1, 0, 1 end
  if opts.xmin then xmin = opts.xmin end
  if opts.xmax then xmax = opts.xmax end
  if opts.ymin then ymin = logy and log10(opts.ymin) or opts.ymin end
  if opts.ymax then ymax = logy and log10(opts.ymax) or opts.ymax end
  if xmax == xmin then xmin, xmax = xmin - 1, xmax + 1 end
  if ymax == ymin then
    local d = math.abs(ymin) > 0 and math.abs(ymin) * 0.1 or 1
    ymin, ymax = ymin - d, ymax + d
  end
  local xt, _, xdec = P.ticks(xmin, xmax, 6)
  local yt, _, ydec = P.ticks(ymin, ymax, 5)
  if logy then
    yt = {}
    for k = floor(ymin), math.ceil(ymax) do yt[#yt + 1] = k end
    ymin, ymax = yt[1], yt[#yt]
    if ymin == ymax then ymax = ymin + 1; yt[2] = ymax end
  else
    if not opts.ymin then ymin = yt[1] end
    if not opts.ymax then ymax = yt[#yt] end
  end
  if not opts.xmin then xmin = math.min(xmin, xt[1]) end
  if not opts.xmax then xmax = math.max(xmax, xt[#xt]) end

  local function sx(x) return ml + (x - xmin) / (xmax - xmin) * pw end
  local function sy(y) return mt + ph - (y - ymin) / (ymax - ymin) * ph end

  local o = {}
  local function add(...) o[#o + 1] = format(...) end
  add('<?xml version="1.0" encoding="UTF-8"?>')
  add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
    .. 'font-family="sans-serif" font-size="12">', W, H, W, H)
  add('<rect x="0" y="0" width="%d" height="%d" fill="white"/>', W, H)
  if opts.title then
    add('<text x="%.1f" y="24" text-anchor="middle" font-size="16" font-weight="bold">%s</text>',
      ml + pw / 2, esc(opts.title))
  end
  -- grid and ticks
  add('<g class="grid" stroke="#e0e0e0" stroke-width="1">')
  for _, v in ipairs(xt) do
    if v >= xmin - 1e-9 and v <= xmax + 1e-9 then
      add('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d"/>', sx(v), mt, sx(v), mt + ph)
    end
  end
  for _, v in ipairs(yt) do
    add('<line x1="%d" y1="%.2f" x2="%d" y2="%.2f"/>', ml, sy(v), ml + pw, sy(v))
  end
  add("</g>")
  add('<g class="axes" stroke="black" stroke-width="1">')
  add('<line x1="%d" y1="%d" x2="%d" y2="%d"/>', ml, mt + ph, ml + pw, mt + ph)
  add('<line x1="%d" y1="%d" x2="%d" y2="%d"/>', ml, mt, ml, mt + ph)
  add("</g>")
  add('<g class="xticks" text-anchor="middle">')
  for _, v in ipairs(xt) do
    if v >= xmin - 1e-9 and v <= xmax + 1e-9 then
      add('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="black"/>',
        sx(v), mt + ph, sx(v), mt + ph + 5)
      add('<text x="%.2f" y="%d">%s</text>', sx(v), mt + ph + 18, esc(tick_label(v, xdec)))
    end
  end
  add("</g>")
  add('<g class="yticks" text-anchor="end">')
  for _, v in ipairs(yt) do
    local label = logy and tick_label(10 ^ v, math.max(0, -v)) or tick_label(v, ydec)
    add('<line x1="%d" y1="%.2f" x2="%d" y2="%.2f" stroke="black"/>', ml - 5, sy(v), ml, sy(v))
    add('<text x="%d" y="%.2f" dominant-baseline="middle">%s</text>', ml - 8, sy(v), esc(label))
  end
  add("</g>")
  if opts.xlabel then
    add('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', ml + pw / 2, H - 10, esc(opts.xlabel))
  end
  if opts.ylabel then
    add('<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>',
      mt + ph / 2, mt + ph / 2, esc(opts.ylabel))
  end

  -- the series: one polyline per unbroken run of finite points
  local colors = opts.colors or P.COLORS
  add('<g class="series" fill="none" stroke-width="1.5" stroke-linejoin="round">')
  for k, s in ipairs(list) do
    local color = colors[(k - 1) % #colors + 1]
    add('<g class="line" stroke="%s" data-name="%s"><title>%s</title>', color, esc(s.name), esc(s.name))
    local pts = {}
    local function flush()
      if #pts == 1 then
        local x, y = pts[1]:match("([^,]+),(.+)")
        add('<circle cx="%s" cy="%s" r="2.5" fill="%s" stroke="none"/>', x, y, color)
      end
      if #pts >= 1 then add('<polyline points="%s"/>', concat(pts, " ")) end
      pts = {}
    end
    for i = 1, #s.y do
      local x, y = s.x and s.x[i] or i, s.y[i]
      if finite(x) and finite(y) and (not logy or y > 0) then
        if logy then y = log10(y) end
        pts[#pts + 1] = format("%.2f,%.2f", sx(x), sy(y))
      else
        flush()
      end
    end
    flush()
    add("</g>")
  end
  add("</g>")

  -- legend, top right inside the plot area
  local lw = 0
  for _, s in ipairs(list) do lw = math.max(lw, #tostring(s.name)) end
  lw = lw * 7 + 40
  local lx, ly = ml + pw - lw - 8, mt + 8
  add('<g class="legend">')
  add('<rect x="%.1f" y="%d" width="%d" height="%d" fill="white" fill-opacity="0.85" '
    .. 'stroke="#bbbbbb"/>', lx, ly, lw, #list * 18 + 8)
  for k, s in ipairs(list) do
    local color = colors[(k - 1) % #colors + 1]
    local y = ly + 4 + (k - 1) * 18 + 9
    add('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"/>',
      lx + 6, y, lx + 26, y, color)
    add('<text x="%.1f" y="%d" dominant-baseline="middle">%s</text>', lx + 32, y, esc(s.name))
  end
  add("</g>")
  add("</svg>")
  local text = concat(o, "\n") .. "\n"

  if path then
    local f, err = io.open(path, "w")
    if not f then fail(path .. ": cannot open: " .. tostring(err), 2) end
    local ok, werr = f:write(text)
    f:close()
    if not ok then fail(path .. ": write failed: " .. tostring(werr), 2) end
  end
  return text
end

return P
