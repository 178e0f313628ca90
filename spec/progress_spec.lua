-- ember.progress (plain lines off a terminal, in-place redraws on one) and
-- ember.plot.svg (a well-formed SVG with a line per series).
local H = require("helpers")
local ember = H.ember
local U = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".")
  .. "/../cli/tests/spec_util.lua")

-- a file-like sink and a clock the spec moves by hand
local function sink()
  local s = { parts = {} }
  function s:write(...) for _, p in ipairs({ ... }) do self.parts[#self.parts + 1] = p end end
  function s:flush() end
  function s:text() return table.concat(self.parts) end
  return s
end
local function fake_clock()
  local c = { t = 100 }
  c.fn = function() return c.t end
  return c
end
local function lines(text)
  local r = {}
  for l in text:gmatch("([^\n]*)\n") do r[#r + 1] = l end
  return r
end

describe("ember.progress", function()
  it("prints a plain line at each tenth when not on a terminal", function()
    local out, clk = sink(), fake_clock()
    local bar = ember.progress(20, { desc = "train", file = out, tty = false, clock = clk.fn })
    for i = 1, 20 do
      clk.t = clk.t + 0.5
      bar:update(1, { loss = 1 / i })
    end
    bar:close()
    local text = out:text()
    assert.is_nil(text:find("\r", 1, true))
    local l = lines(text)
    assert.are.equal(10, #l)
    assert.are.equal("train:  10% 2/20 [00:01<00:09, 2.00 it/s, loss=0.5]", l[1])
    assert.are.equal("train: 100% 20/20 [00:10<00:00, 2.00 it/s, loss=0.05]", l[10])
    bar:close()   -- twice is fine
    assert.are.equal(10, #lines(out:text()))
  end)

  it("prints a final line when closed early, with several sorted postfix values", function()
    local out, clk = sink(), fake_clock()
    local bar = ember.progress(100, { file = out, tty = false, clock = clk.fn })
    clk.t = clk.t + 4
    bar:update(5, { loss = ember.tensor(0.25), acc = 0.5, step = 5 })
    bar:close()
    assert.are.same({ "  5% 5/100 [00:04<01:16, 1.25 it/s, acc=0.5, loss=0.25, step=5]" }, lines(out:text()))
  end)

  it("handles an unknown total and slow iterations", function()
    local out, clk = sink(), fake_clock()
    local bar = ember.progress(nil, { desc = "eval", file = out, tty = false, clock = clk.fn,
      log_interval = 60 })
    for _ = 1, 3 do clk.t = clk.t + 25; bar:update() end   -- one line after 60 s
    bar:close()
    assert.are.same({ "eval: 3 [01:15, 25.00 s/it]" }, lines(out:text()))   -- close adds no repeat
    out, clk = sink(), fake_clock()
    bar = ember.progress(nil, { file = out, tty = false, clock = clk.fn })
    bar:update(7)
    bar:close()
    assert.are.same({ "7 [00:00, ? it/s]" }, lines(out:text()))
  end)

  it("redraws in place with \\r on a terminal, at most every interval", function()
    local out, clk = sink(), fake_clock()
    local bar = ember.progress(4, { desc = "d", file = out, tty = true, clock = clk.fn, width = 8 })
    bar:update(1)               -- no time has passed: no redraw
    clk.t = clk.t + 1
    bar:update(1, { loss = 2 })   -- redraw
    bar:update(2)               -- done: redraw
    bar:close()
    local text = out:text()
    local _, n_cr = text:gsub("\r", "")
    assert.are.equal(4, n_cr)   -- start, one timed redraw, completion, close
    assert.is_truthy(text:find("\rd:  50%|####    | 2/4 [00:01<00:01, 2.00 it/s, loss=2]", 1, true))
    assert.is_truthy(text:find("\rd: 100%|########| 4/4 [00:01<00:00, 4.00 it/s, loss=2]", 1, true))
    assert.are.equal("\n", text:sub(-1))
  end)

  it("detects a pipe as not a terminal", function()
    local script = "package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path; "
      .. "local ember = require('ember'); local b = ember.progress(4, {desc = 'p'}); "
      .. "for i = 1, 4 do b:update(1, {loss = i}) end; b:close()"
    local text = H.output('luajit -e "' .. script .. '"')
    assert.is_nil(text:find("\r", 1, true))
    local l = lines(text)
    assert.are.equal(4, #l)
    assert.is_truthy(l[4]:find("^p: 100%% 4/4 %[.*it/s, loss=4%]$"), l[4])
  end)

  it("cuts a long line to the given width, and drops status fields to keep a bar", function()
    local out, clk = sink(), fake_clock()
    local bar = ember.progress(10, { desc = "a long description", file = out, tty = true,
      clock = clk.fn, columns = 30 })
    bar:update(10)
    bar:close()
    local last = out:text():match("\r([^\r]*)\n$")
    assert.are.equal("a long description: 100%|####", last)
    out = sink()
    bar = ember.progress(10, { desc = "é", file = out, tty = true, clock = clk.fn, columns = 38 })
    bar:close()
    last = out:text():match("\r([^\r]*)\n$")
    assert.are.equal("é:   0%|             | 0/10 [00:00<?]", last)   -- 37 cells, 38 bytes; no rate
  end)

  -- The bar under a real terminal: `script` (util-linux) gives the program a
  -- pty, `stty cols` sets its width; the terminal turns \n into \r\n.
  describe("on a pseudo-terminal", function()
    if not U.have_script() then pending("util-linux `script` is not installed: no pseudo-terminal test") return end
    local dir
    setup(function()
      dir = U.tmpdir()
      U.write(dir .. "/bar.lua", [[
        package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
        local t = 0
        local bar = require("ember.progress")(50, { desc = "epoch 1/10", interval = 0,
          clock = function() return t end })
        for i = 1, 50 do t = t + 0.01; bar:update(1, { loss = 1 / i }) end
        bar:close()
      ]])
    end)
    teardown(function() U.rm_rf(dir) end)

    -- the redrawn lines a bar printed on a pty of `cols` columns
    local function draw(cols, columns)
      -- (COLUMNS is set after stty: bash would reset an exported one to the size)
      local r = U.run({ "script", "-qec", "stty cols " .. cols .. " rows 24 && exec env "
        .. (columns and "COLUMNS=" .. columns or "-u COLUMNS") .. " luajit " .. U.quote(dir .. "/bar.lua"),
        "/dev/null" }, { cwd = U.root })
      assert.are.equal(0, r.rc, r.out .. r.err)
      local drawn = {}
      for l in r.out:gmatch("[^\r\n]+") do drawn[#drawn + 1] = l end
      return drawn, r.out
    end

    for _, case in ipairs({ { 60 }, { 120 }, { 60, "100" } }) do
      local cols, columns = case[1], case[2]
      local width = tonumber(columns) or cols
      it(("fills %d columns less one on a %d-column terminal%s"):format(width, cols,
        columns and " with COLUMNS=" .. columns or ""), function()
        local drawn, raw = draw(cols, columns)
        assert.are.equal(52, #drawn, raw)   -- the start, 50 updates, close
        for _, l in ipairs(drawn) do assert.are.equal(width - 1, #l, l) end
        assert.matches("^epoch 1/10: 100%%|#+| 50/50 %[.*loss=0.02%] *$", drawn[52])
        assert.are.equal("\r\n", raw:sub(-2))
      end)
    end
  end)

  it("formats durations", function()
    assert.are.equal("00:00", ember.progress.format_time(0))
    assert.are.equal("01:05", ember.progress.format_time(65))
    assert.are.equal("1:01:01", ember.progress.format_time(3661))
    assert.are.equal("?", ember.progress.format_time(math.huge))
  end)

  it("rejects a bad total", function()
    assert.error_matches(function() ember.progress("ten") end, "ember.progress: total must be", 1, true)
  end)
end)

-- a small XML well-formedness check: balanced tags, quoted attributes, known entities
local function check_xml(s)
  s = s:gsub("^<%?xml[^>]*%?>%s*", "")
  local stack, pos, root_closed = {}, 1, false
  while true do
    local a = s:find("<", pos, true)
    local text = s:sub(pos, (a or #s + 1) - 1)
    for ent in text:gmatch("&([^;]*);") do
      assert(ent == "amp" or ent == "lt" or ent == "gt" or ent == "quot" or ent == "apos",
        "unknown entity &" .. ent .. ";")
    end
    assert(not text:find("&[^%a]"), "bare & in text")
    assert(not text:find(">", 1, true), "bare > in text")
    if not a then break end
    assert(not root_closed, "content after the root element")
    local b = s:find(">", a, true)
    assert(b, "unterminated tag")
    local tag = s:sub(a + 1, b - 1)
    if tag:sub(1, 1) == "/" then
      local name = tag:sub(2):match("^[%w:%-]+")
      assert(stack[#stack] == name, "closing " .. tostring(name) .. " but open is " .. tostring(stack[#stack]))
      stack[#stack] = nil
      if #stack == 0 then root_closed = true end
    else
      local name, rest = tag:match("^([%w:%-]+)(.-)/?$")
      assert(name, "bad tag <" .. tag .. ">")
      local stripped = rest:gsub('%s+[%w:%-]+="[^"<]*"', "")
      assert(stripped:match("^%s*$"), "bad attributes in <" .. tag .. ">")
      if tag:sub(-1) ~= "/" then stack[#stack + 1] = name
      elseif #stack == 0 then root_closed = true end
    end
    pos = b + 1
  end
  assert(#stack == 0, "unclosed " .. tostring(stack[#stack]))
  assert(root_closed, "no root element")
  return true
end

describe("ember.plot.svg", function()
  local tmp = H.tmp_each(before_each, after_each)
  local read = H.read
  local function polylines_of(svg, name)
    local group = svg:match('<g class="line" stroke="[^"]*" data%-name="' .. name:gsub("%p", "%%%0")
      .. '" data%-axis="[a-z]+">(.-)</g>')
    assert(group, "no group for series " .. name)
    local n = 0
    for _ in group:gmatch("<polyline points=\"[%d%.%-, ]+\"/>") do n = n + 1 end
    return n
  end

  it("writes a well-formed SVG with axes, ticks, legend, title and a line per series", function()
    local path = tmp("curves.svg")
    local loss, acc = {}, {}
    for i = 1, 30 do loss[i] = 2 / i; acc[i] = 1 - 1 / (i + 1) end
    local text = ember.plot.svg(path, { loss = loss, ["test acc"] = acc },
      { title = "Fashion-MNIST <run & 1>", xlabel = "epoch", ylabel = "value" })
    local svg = read(path)
    assert.are.equal(text, svg)
    check_xml(svg)
    if os.execute("command -v xmllint >/dev/null 2>&1") == 0 then
      assert.are.equal(0, os.execute("xmllint --noout '" .. path .. "' 2>/dev/null"))
    end
    assert.is_truthy(svg:find('<svg xmlns="http://www.w3.org/2000/svg"', 1, true))
    assert.are.equal(1, polylines_of(svg, "loss"))
    assert.are.equal(1, polylines_of(svg, "test acc"))
    assert.is_truthy(svg:find("Fashion-MNIST &lt;run &amp; 1&gt;", 1, true))
    assert.is_truthy(svg:find('class="axes"', 1, true))
    assert.is_truthy(svg:find('class="xticks"', 1, true))
    assert.is_truthy(svg:find('class="legend"', 1, true))
    assert.is_truthy(svg:find(">epoch</text>", 1, true))
    assert.is_truthy(svg:find(">test acc</text>", 1, true))
    -- every point lies inside the drawing
    for x, y in svg:gmatch("(%-?[%d%.]+),(%-?[%d%.]+)") do
      x, y = tonumber(x), tonumber(y)
      assert.is_true(x >= 0 and x <= 640 and y >= 0 and y <= 400)
    end
  end)

  it("breaks a line at non-finite values and accepts other series forms", function()
    local path = tmp("p.svg")
    ember.plot.svg(path, { { name = "a", y = { 1, 2, 0 / 0, 3, 4 } },
      { name = "b", x = { 0, 10, 20 }, values = { 5, 4, 3 } } }, { logy = true })
    local svg = read(path)
    check_xml(svg)
    assert.are.equal(2, polylines_of(svg, "a"))
    assert.are.equal(1, polylines_of(svg, "b"))
    local one = ember.plot.svg(nil, { 3, 1, 2 }, { name = "only" })
    check_xml(one)
    assert.are.equal(1, polylines_of(one, "only"))
    local t = ember.plot.svg(nil, { w = ember.tensor({ 1, 2, 3 }), k = { 7 } })
    check_xml(t)
    assert.are.equal(1, polylines_of(t, "w"))
    assert.are.equal(1, polylines_of(t, "k"))   -- a single point: a circle and a polyline
    assert.is_truthy(t:find("<circle", 1, true))
  end)

  -- the ticks of a group (class "xticks", "yticks" or "y2ticks"): their labels,
  -- values and pixel positions (x for the x axis, y for the others)
  local function ticks_of(svg, class)
    local group = assert(svg:match('<g class="' .. class .. '"[^>]*>(.-)</g>'), "no " .. class)
    local t = {}
    for x, y, label in group:gmatch('<text x="([%d%.%-]+)" y="([%d%.%-]+)"[^>]*>([^<]*)</text>') do
      t[#t + 1] = { label = label, value = tonumber(label), at = tonumber(class == "xticks" and x or y) }
    end
    return t
  end
  local function labels(ticks)
    local l = {}
    for i, t in ipairs(ticks) do l[i] = t.label end
    return l
  end
  -- equally spaced by 1, 2 or 5 times a power of ten, each a multiple of that step
  local function assert_round(ticks)
    assert.is_true(#ticks >= 2, "fewer than 2 ticks")
    local step = ticks[2].value - ticks[1].value
    local m = step / 10 ^ math.floor(math.log10(step) + 1e-9)
    assert.is_true(math.abs(m - 1) < 1e-6 or math.abs(m - 2) < 1e-6 or math.abs(m - 5) < 1e-6,
      "step " .. step)
    for i, t in ipairs(ticks) do
      assert.near(ticks[1].value + (i - 1) * step, t.value, 1e-9 * step)
      local k = t.value / step
      assert.near(math.floor(k + 0.5), k, 1e-6, t.label .. " is not a multiple of " .. step)
    end
  end
  -- where a value lands on an axis, from its first and last ticks (the axes are linear)
  local function position(ticks, v)
    local a, b = ticks[1], ticks[#ticks]
    return a.at + (v - a.value) / (b.value - a.value) * (b.at - a.at)
  end
  -- every series' runs of points, in pixels
  local function lines_of(svg)
    local runs = {}
    for pts in svg:gmatch('<polyline points="([^"]*)"') do
      local run = {}
      for x, y in pts:gmatch("([%d%.%-]+),([%d%.%-]+)") do run[#run + 1] = { tonumber(x), tonumber(y) } end
      runs[#runs + 1] = run
    end
    return runs
  end
  local function points_of(svg, name)
    local group = svg:match('data%-name="' .. name:gsub("%p", "%%%0") .. '"[^>]*>(.-)</g>')
    return lines_of(group)[1]
  end
  local function legend_box(svg)
    local x, y, w, h = svg:match('<g class="legend">%s*<rect x="([%d%.]+)" y="([%d%.]+)" '
      .. 'width="([%d%.]+)" height="([%d%.]+)"')
    return { x = tonumber(x), y = tonumber(y), w = tonumber(w), h = tonumber(h) }
  end
  -- no point of any line, sampled 50 times along each segment, lies in the legend
  local function assert_legend_clear(svg)
    local b = legend_box(svg)
    for _, run in ipairs(lines_of(svg)) do
      for i = 1, #run do
        local p, q = run[i], run[i + 1] or run[i]
        for k = 0, 50 do
          local x, y = p[1] + (q[1] - p[1]) * k / 50, p[2] + (q[2] - p[2]) * k / 50
          assert.is_false(x >= b.x and x <= b.x + b.w and y >= b.y and y <= b.y + b.h,
            ("(%.1f, %.1f) is inside the legend"):format(x, y))
        end
      end
    end
    return b
  end
  local function text_of(svg, class) return svg:match('<text class="' .. class .. '"[^>]*>([^<]*)</text>') end

  it("draws accuracy on its own right axis, with round ticks and every axis labelled", function()
    local loss, acc = { 0.5936, 0.3931, 0.3222 }, { 0.8371, 0.8512, 0.8633 }
    local svg = ember.plot.svg(nil, { { name = "train loss", values = loss },
      { name = "test accuracy", values = acc, axis = "right" } }, { xlabel = "epoch" })
    check_xml(svg)
    local xt, yt, y2t = ticks_of(svg, "xticks"), ticks_of(svg, "yticks"), ticks_of(svg, "y2ticks")
    assert.are.same({ "1", "2", "3" }, labels(xt))   -- epochs: no tick at 1.5
    assert.are.same({ "0.3", "0.4", "0.5", "0.6" }, labels(yt))
    assert.are.same({ "0.83", "0.84", "0.85", "0.86", "0.87" }, labels(y2t))
    assert.are.equal("epoch", text_of(svg, "xlabel"))
    assert.are.equal("train loss", text_of(svg, "ylabel"))
    assert.are.equal("test accuracy", text_of(svg, "y2label"))
    -- each curve sits where its own axis puts its values
    for name, s in pairs({ ["train loss"] = { loss, yt }, ["test accuracy"] = { acc, y2t } }) do
      local pts = points_of(svg, name)
      for i, v in ipairs(s[1]) do
        assert.near(position(xt, i), pts[i][1], 0.01)
        assert.near(position(s[2], v), pts[i][2], 0.01)
      end
    end
    assert_legend_clear(svg)
  end)

  it("puts ticks on round values and whole numbers for whole-number x", function()
    local function xlabels(n, x)
      local y = {}
      for i = 1, n do y[i] = math.sin(i) end
      local svg = ember.plot.svg(nil, { { name = "s", y = y, x = x } })
      assert_round(ticks_of(svg, "yticks"))
      local t = ticks_of(svg, "xticks")
      assert_round(t)
      return labels(t)
    end
    assert.are.same({ "1", "2" }, xlabels(2))
    assert.are.same({ "2", "4", "6", "8", "10" }, xlabels(10))
    assert.are.same({ "5", "10", "15", "20", "25", "30" }, xlabels(30))
    local x = {}
    for i = 1, 11 do x[i] = (i - 1) / 10 end
    assert.are.same({ "0.0", "0.2", "0.4", "0.6", "0.8", "1.0" }, xlabels(11, x))
    for i = 1, 11 do x[i] = 1000 + 30 * i end
    assert.are.same({ "1050", "1100", "1150", "1200", "1250", "1300" }, xlabels(11, x))
    local log = ember.plot.svg(nil, { a = { 1, 2, 0 / 0, 3, 4 }, b = { 5, 4, 3 } }, { logy = true })
    assert.are.same({ "1", "2", "5" }, labels(ticks_of(log, "yticks")))
    log = ember.plot.svg(nil, { a = { 0.001, 50 } }, { logy = true })
    assert.are.same({ "0.001", "0.01", "0.1", "1", "10", "100" }, labels(ticks_of(log, "yticks")))
  end)

  it("keeps the legend off the lines: a free corner, else outside the plot area", function()
    local loss, acc = {}, {}
    for i = 1, 10 do loss[i] = 0.3 + 0.4 / i; acc[i] = 0.8 + 0.09 * (1 - 1 / i) end
    local svg = ember.plot.svg(nil, { loss = loss, acc = acc })   -- the top right is taken
    local b = assert_legend_clear(svg)
    local area = svg:match('<clipPath id="ember%-plot%-area"><rect x="([%d%.]+)"')
    assert.is_true(b.x > tonumber(area), "legend inside the plot area")
    local zigzag = {}
    for i = 1, 60 do zigzag[i] = i % 2 end   -- crosses every place inside
    svg = ember.plot.svg(nil, { { name = "zigzag", values = zigzag }, { name = "flat", values = { 0.5, 0.5 } } })
    b = assert_legend_clear(svg)
    for _, run in ipairs(lines_of(svg)) do
      for _, p in ipairs(run) do assert.is_true(p[1] < b.x, "a point right of the legend's left edge") end
    end
    assert.is_true(b.x + b.w <= 640)
  end)

  it("rejects bad series with clear errors", function()
    assert.error_matches(function() ember.plot.svg(nil, 5) end, "ember.plot.svg: series must be a table", 1, true)
    assert.error_matches(function() ember.plot.svg(nil, {}) end, "no series to plot", 1, true)
    assert.error_matches(function() ember.plot.svg(nil, { a = { 1, "x" } }) end,
      "series 'a': value 2 is a string, not a number", 1, true)
    assert.error_matches(function() ember.plot.svg(nil, { { name = "a", x = { 1 }, y = { 1, 2 } } }) end,
      "series 'a' has 1 x values and 2 y values", 1, true)
    assert.error_matches(function() ember.plot.svg(tmp("no/such/x.svg"), { 1, 2 }) end,
      "cannot open", 1, true)
    assert.error_matches(function() ember.plot.svg(nil, { { name = "a", y = { 1 }, axis = "up" } }) end,
      'ember.plot.svg: series \'a\': axis must be "left" or "right", got up', 1, true)
    assert.error_matches(function() ember.plot.svg(nil, { 1, 2 }, { ymin = 3, ymax = 1 }) end,
      "ember.plot.svg: ymin 3 is above ymax 1", 1, true)
    assert.error_matches(function() ember.plot.svg(nil, { 1, 2 }, { logy = true, ymin = 0 }) end,
      "ember.plot.svg: ymin must be a positive number, got 0", 1, true)
  end)
end)
