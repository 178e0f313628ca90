-- ember.doc: the API reference, the one source of every public name's
-- documentation. The section files beside this one (lua/ember/doc/<name>.lua)
-- hold markdown: "## name: title" opens a section (its text documents the
-- table or class of that name), "### `sig`, `sig`" opens an entry for the
-- names its signatures begin with. ember.help prints entries at the prompt;
-- scripts/api_doc.lua writes the same text to docs/api.md; spec/doc_spec.lua
-- fails for a public name without an entry and for an api.md out of date.
-- The section files are read at the first help, not when ember loads.
local suggest = require("ember.suggest")

local M = {}

-- the section files, in the order of docs/api.md
M.SECTIONS = { "tensor", "ops", "tensorlib", "autodiff", "amp", "graph", "nn", "functional", "optim", "data",
  "io", "distributed", "distributions", "jit", "runtime", "loader" }

-- Tables whose every public key is a public name, written "<path>.<key>"
-- (plain tables of functions found in them, such as ember.io.json, too).
M.TABLES = { "ember", "ember.linalg", "ember.nn", "ember.nn.functional", "ember.optim",
  "ember.optim.lr_scheduler", "ember.autodiff", "ember.amp", "ember.autodiff.graph", "ember.data", "ember.io",
  "ember.distributed", "ember.cuda", "ember.plot", "ember.progress", "ember.loader", "ember.frame", "ember.distributions", "ember.jit", "ember.dtr" }

-- Classes whose methods are public names, written "<Class>:<method>": the
-- class and the path of the table holding its methods.
M.CLASSES = {
  { "Tensor", "ember.Tensor" },
  { "Generator", "ember.Generator_class" },
  { "Distribution", "ember.distributions.Distribution" },
  { "Module", "ember.nn.Module" },
  { "Optimizer", "ember.optim.Optimizer" },
  { "LRScheduler", "ember.optim.lr_scheduler.LRScheduler" },
  { "GradManager", "ember.autodiff.GradManager" },
  { "GradScaler", "ember.amp.GradScaler" },
  { "BackwardRun", "ember.autodiff.BackwardRun" },
  { "StepRun", "ember.frame.StepRun" },
  { "Plan", "ember.jit.Plan" },
  { "PlanRun", "ember.jit.PlanRun" },
  { "Node", "ember.autodiff.graph.Node" },
  { "DataLoader", "ember.data.DataLoader_class" },
  { "TensorDataset", "ember.data.TensorDataset_class" },
  { "Bar", "ember.progress.Bar" },
}

-- short forms people type at the prompt: prefixes, and whole names
local ALIASES = { ["F."] = "ember.nn.functional.", ["nn."] = "ember.nn.",
  ["optim."] = "ember.optim.", ["t:"] = "Tensor:", ["x:"] = "Tensor:", ["gm:"] = "GradManager:" }
local SHORT_NAMES = { F = "ember.nn.functional", Tensor = "ember.Tensor",
  GradManager = "ember.autodiff.GradManager" }

---------------------------------------------------------------- parsing
local function trim_blank(lines)
  while lines[1] == "" do table.remove(lines, 1) end
  while lines[#lines] == "" do table.remove(lines) end
  return lines
end

-- {texts = {...}, sections = {...}, by_name = {name -> entry or section}}
local function parse()
  local texts, sections, by_name = {}, {}, {}
  local function register(name, doc)
    if by_name[name] and by_name[name] ~= doc then
      error("ember.doc: " .. name .. " is documented twice", 0)
    end
    by_name[name] = doc
  end
  for _, file in ipairs(M.SECTIONS) do
    local text = require("ember.doc." .. file)
    texts[#texts + 1] = text
    local sec, body
    for line in (text .. "\n"):gmatch("(.-)\n") do
      local title, heads = line:match("^## (.*)$"), line:match("^### (.*)$")
      if title then
        sec = { file = file, title = title, name = title:match("^`?([%w_.:]+)"), body = {},
          entries = {} }
        sections[#sections + 1], body = sec, sec.body
        register(sec.name, sec)
      elseif heads then
        local e = { sigs = {}, names = {}, body = {}, section = sec }
        for sig in heads:gmatch("`([^`]+)`") do
          e.sigs[#e.sigs + 1] = sig
          local name = sig:match("^[%w_.:]+")
          if not by_name[name] then e.names[#e.names + 1] = name end
          register(name, e)
        end
        sec.entries[#sec.entries + 1], body = e, e.body
      else
        body[#body + 1] = line
      end
    end
  end
  for _, sec in ipairs(sections) do
    trim_blank(sec.body)
    for _, e in ipairs(sec.entries) do trim_blank(e.body) end
  end
  return { texts = texts, sections = sections, by_name = by_name }
end

local docs
function M.docs()
  docs = docs or parse()
  return docs
end

---------------------------------------------------------------- public names
-- the value at a dotted path from ember, without raising for a missing part
function M.resolve(ember, path)
  local v = ember
  for part in (path:gsub("^ember%.?", "")):gmatch("[^.]+") do
    if type(v) ~= "table" then return nil end
    v = rawget(v, part)
  end
  return v
end

local function methods(class)
  local out = {}
  local mt = getmetatable(class)
  local inherited = type(mt) == "table" and type(rawget(mt, "__index")) == "table" and mt.__index
  for _, t in ipairs({ inherited or {}, class }) do
    for _, k in ipairs(suggest.public_names(t)) do
      if type(rawget(t, k)) == "function" then out[k] = rawget(t, k) end
    end
  end
  return out
end

-- a plain table of functions (a module such as ember.io.json): no
-- metatable, no "__" keys (which mark classes), some public function
local function is_module(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil then return false end
  local fn = false
  for k, x in pairs(v) do
    if type(k) == "string" and k:sub(1, 2) == "__" then return false end
    fn = fn or (type(x) == "function" and type(k) == "string" and k:sub(1, 1) ~= "_")
  end
  return fn
end

-- every public name with its value, {{name, value}, ...} in a stable order:
-- the keys of M.TABLES and of the plain modules found in them, and the
-- methods of M.CLASSES
function M.public(ember)
  local list, queue, seen = {}, {}, {}
  for _, path in ipairs(M.TABLES) do queue[#queue + 1] = { path, M.resolve(ember, path) } end
  local i = 1
  while queue[i] do
    local path, t = queue[i][1], queue[i][2]
    i = i + 1
    if type(t) == "table" and not seen[t] then
      seen[t] = true
      for _, k in ipairs(suggest.public_names(t)) do
        local v = rawget(t, k)
        list[#list + 1] = { path .. "." .. k, v }
        if is_module(v) then queue[#queue + 1] = { path .. "." .. k, v } end
      end
    end
  end
  for _, c in ipairs(M.CLASSES) do
    local class = M.resolve(ember, c[2])
    if type(class) == "table" then
      local m = methods(class)
      for _, k in ipairs(suggest.public_names(m)) do
        list[#list + 1] = { c[1] .. ":" .. k, m[k] }
      end
    end
  end
  return list
end

-- the public names that have no entry
function M.missing(ember)
  local by_name, out = M.docs().by_name, {}
  for _, p in ipairs(M.public(ember)) do
    if not by_name[p[1]] then out[#out + 1] = p[1] end
  end
  return out
end

-- the section file where a name's entry belongs: that of the closest
-- enclosing section (the class's, for a method), as a path from the root
function M.where(name)
  local by_name = M.docs().by_name
  local function file(sec) return "lua/ember/doc/" .. sec.file .. ".lua" end
  local class, method = name:match("^([%w_]+):([%w_]+)$")
  for _, c in ipairs(M.CLASSES) do
    if c[1] == class and by_name[c[2]] then return file(by_name[c[2]]) end
  end
  local owner = method and "ember" or name
  repeat
    owner = owner:match("^(.*)%.[^.]*$") or "ember"
    local sec = by_name[owner]
    if sec and sec.entries then return file(sec) end
  until owner == "ember"
  return file(by_name.ember)
end

---------------------------------------------------------------- help
local function ember_pkg() return package.loaded.ember end

-- the entry for a name as typed: exact, with "ember." or an alias in front,
-- or the only name ending in ".name"/":name"
function M.find(name)
  local by_name = M.docs().by_name
  name = SHORT_NAMES[name] or name
  if by_name[name] then return by_name[name] end
  for short, long in pairs(ALIASES) do
    if name:sub(1, #short) == short and by_name[long .. name:sub(#short + 1)] then
      return by_name[long .. name:sub(#short + 1)]
    end
  end
  if by_name["ember." .. name] then return by_name["ember." .. name] end
  local hits = {}
  for n, e in pairs(by_name) do
    if n:sub(-#name - 1) == "." .. name or n:sub(-#name - 1) == ":" .. name then hits[e] = true end
  end
  local only = next(hits)
  if only and next(hits, only) == nil then return only end
end

-- the public name of each function and table, and of each class's method
-- table (what its instances have as metatable)
local function names_by_value(ember)
  local names = {}
  for _, p in ipairs(M.public(ember)) do
    local kind = type(p[2])
    if (kind == "function" or kind == "table") and names[p[2]] == nil then names[p[2]] = p[1] end
  end
  for _, c in ipairs(M.CLASSES) do
    local mt = getmetatable(M.resolve(ember, c[2]))
    local methods_table = type(mt) == "table" and rawget(mt, "__index")
    if type(methods_table) == "table" then names[methods_table] = names[methods_table] or c[2] end
  end
  return names
end

-- the entry documenting a value: its own, else its class's (an instance's
-- metatable, or the __class a module's metatable names, a few levels up)
function M.find_value(v)
  local ember, by_name = ember_pkg(), M.docs().by_name
  if ember.is_tensor(v) then return by_name["ember.Tensor"] end
  if rawequal(v, ember) then return by_name.ember end
  local names = names_by_value(ember)
  for _ = 1, 4 do
    local doc = names[v] and by_name[names[v]]
    if doc then return doc end
    local mt = getmetatable(v)
    if type(mt) ~= "table" then return nil end
    v = rawget(mt, "__class") or mt
  end
end

local function indent(lines)
  local out = {}
  for i, l in ipairs(lines) do out[i] = l == "" and "" or "  " .. l end
  return table.concat(out, "\n")
end

local function wrap_words(words, width)
  local lines, line = {}, ""
  for _, w in ipairs(words) do
    if #line > 0 and #line + #w + 2 > width then
      lines[#lines + 1], line = line .. ",", w
    else
      line = #line > 0 and line .. ", " .. w or w
    end
  end
  lines[#lines + 1] = line
  return lines
end

-- the text of an entry or a section, as help prints it
function M.show(doc)
  local out = {}
  if doc.sigs then
    for _, sig in ipairs(doc.sigs) do out[#out + 1] = sig end
  else
    out[1] = doc.title:gsub("`", "")
  end
  out[#out + 1] = ""
  out[#out + 1] = indent(doc.body)
  if doc.entries then
    local names = {}
    for _, e in ipairs(doc.entries) do names[#names + 1] = e.names[1] end
    out[#out + 1] = ""
    out[#out + 1] = indent(wrap_words(names, 76))
  end
  local sec = doc.section or doc
  out[#out + 1] = ""
  out[#out + 1] = "  (docs/api.md, " .. sec.title:gsub("`", "") .. ")"
  return table.concat(out, "\n")
end

local OVERVIEW = [[
help(x) or ?name at the ember prompt prints the documentation of a public
name: help(ember.nn.Linear), help("F.linear"), ?ember.zeros, ?t:sum.
The sections (help("ember.nn") lists a section's names):
]]

-- the text help(x) prints
function M.text(x)
  if x == nil then
    local lines = {}
    for _, sec in ipairs(M.docs().sections) do
      lines[#lines + 1] = "  " .. sec.title:gsub("`", "")
    end
    return OVERVIEW .. table.concat(lines, "\n")
  end
  local doc = type(x) == "string" and M.find(x) or M.find_value(x)
  if doc then return M.show(doc) end
  if type(x) ~= "string" then
    return ("ember.help: no entry documents this %s (%s)"):format(type(x), tostring(x))
  end
  local names = {}
  for n in pairs(M.docs().by_name) do names[#names + 1] = n end
  table.sort(names)
  return ("ember.help: no entry for '%s'%s"):format(x, suggest.phrase(suggest.closest(x, names)))
end

function M.help(x)
  io.write(M.text(x), "\n")
  io.flush()
end

---------------------------------------------------------------- docs/api.md
local HEADER = [[
# ember API reference

<!-- Generated from lua/ember/doc/*.lua by `luajit scripts/api_doc.lua`: edit
those files, then run it. spec/doc_spec.lua checks that this file is current. -->

Every public name of the Lua package, with its signature and what it does.
At the `ember` prompt, `?name` and `help(value)` print the same entries
(`?ember.nn.Linear`, `help(F.linear)`, `help(t)`).

Conventions for the whole API: dims and indices are 1-based (negative ones
count from the end); shapes are Lua lists (`{2, 3}`); options come in a last
table; the default dtype is float32; every error is a Lua error naming the
call (`ember.add: ...`) and the shapes, dtypes or values at fault.

Sections:
]]

function M.markdown()
  local parts, toc = {}, {}
  for _, sec in ipairs(M.docs().sections) do toc[#toc + 1] = "- " .. sec.title end
  for i, text in ipairs(M.docs().texts) do parts[i] = text:gsub("%s+$", "") end
  return HEADER .. table.concat(toc, "\n") .. "\n\n" .. table.concat(parts, "\n\n") .. "\n"
end

return M
