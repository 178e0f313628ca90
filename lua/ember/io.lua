-- ember.save / ember.load: tensors in the safetensors format through ember's
-- one codec, the C core's (core/src/io/safetensors.c: ember_st_save,
-- ember_st_open): it writes atomically, reads defensively and keeps the
-- metadata string map. What only Lua can do stays here: the values of a
-- Lua table to names, tensors and strings and back. Flat name -> tensor
-- tables are written as they are; a nested table of tensors, numbers,
-- strings and booleans (a whole training checkpoint) keeps its tensors as
-- ordinary entries and its structure as JSON (ember.json) in the metadata,
-- so any safetensors reader still gets the tensors.
local ffi = require("ffi")
local json = require("ember.json")
local errors = require("ember.errors")

local MAX_INT = 2 ^ 53
local format, find = string.format, string.find
local concat, sort = table.concat, table.sort
local floor = math.floor
local OBJECT, ARRAY = json.OBJECT, json.ARRAY
local valid_utf8, encode_string = json.valid_utf8, json.encode_string

---------------------------------------------------------------- the module
return function(ember)
  local C = ember._C
  local M = { json = json, MAX_HEADER = tonumber(C.EMBER_ST_MAX_HEADER) }

  -- safetensors dtype -> ember dtype, as the codec names them
  local DTYPES = {}
  for id, name in ipairs(ember._DTYPES) do
    local code = C.ember_st_dtype_name(id - 1)
    if code ~= nil then DTYPES[ffi.string(code)] = name end
  end
  M.DTYPES = DTYPES

  local function tensor_ptr(v)
    if type(v) == "table" then
      local c = rawget(v, "_c")
      if type(c) == "cdata" then return c end
    end
    return nil
  end

  -- Lua-side errors thrown inside the pcall boundary of save/load: plain strings
  -- (level 0) that the boundary prefixes with "ember.save: <path>: ".
  local function raise(fmt, ...) error(select("#", ...) > 0 and format(fmt, ...) or fmt, 0) end

  -- The codec's message ("load: <path>: <what>") raised as <what>.
  local function raise_c(path)
    local msg = ffi.string(C.ember_last_error())
    for _, op in ipairs({ "load: ", "save: " }) do
      local prefix = op .. path .. ": "
      if msg:sub(1, #prefix) == prefix then msg = msg:sub(#prefix + 1) end
    end
    error(msg, 0)
  end

  -- Runs fn() and raises what it raised as "ember.<op>: <path>: <what>".
  local function boundary(op, path, fn, ...)
    local res = { pcall(fn, ...) }
    if not res[1] then
      local err = tostring(res[2])
      local prefix = "ember." .. op .. ": " .. path .. ": "
      if err:sub(1, #prefix) ~= prefix then err = prefix .. err end
      errors.raise(err)
    end
    return unpack(res, 2, 3)
  end

  local function check_path(op, path)
    if type(path) ~= "string" or path == "" then
      errors.fail(op, "expected a file path, got " .. type(path))
    end
    if not ffi.abi("le") then
      errors.fail(op, path .. ": big-endian hosts are not supported")
    end
  end

  ---------------------------------------------------------------- nested tables
  -- A table that is not flat name -> tensor is saved as its tensors, each an
  -- ordinary entry named by its dotted path ("optim.state.1.exp_avg"), and its
  -- structure as JSON in the metadata entry TREE_KEY, where each value is
  --   true | false | "text" | 12.5        a finite number, exact to the bit
  --   {"number": "nan" | "inf" | "-inf"}
  --   {"tensor": "<entry name>"}
  --   {"table": [[key, value], ...]}      keys strings or numbers, numbers first
  -- A tensor object met twice is written once: both places name its entry.
  local TREE_KEY = "ember.tree"
  local MAX_NESTING = 20   -- tables in tables: 3 JSON levels each, under json's 64
  local NONFINITE = { nan = 0 / 0, inf = math.huge, ["-inf"] = -math.huge }

  local function is_flat(tbl)
    for k, v in pairs(tbl) do
      if type(k) ~= "string" or not ember.is_tensor(v) then return false end
    end
    return true
  end

  local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end

  -- a Lua-like path for messages: optim.state[1].exp_avg, model["1.weight"]
  local function child_path(path, k)
    if type(k) == "number" then return format("%s[%s]", path, json.encode(k)) end
    if find(k, "^[%a_][%w_]*$") then return path == "" and k or path .. "." .. k end
    return format("%s[%s]", path, encode_string(k))
  end
  local function where(path) return path == "" and "the top level" or path end

  local function key_before(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta == "number" end
    return a < b
  end

  -- The JSON of tbl's structure; fills tensors (entry name -> tensor).
  local function encode_tree(tbl, tensors)
    local name_of, path_of, open = {}, {}, {}

    local function tensor_ref(t, name, path)
      if tensor_ptr(t) == nil then raise("the tensor at %s was freed", path) end
      if not name_of[t] then
        if path_of[name] then
          raise("the tensors at %s and %s would both be named '%s'", path_of[name], path, name)
        end
        name_of[t], path_of[name], tensors[name] = name, path, t
      end
      return '{"tensor":' .. encode_string(name_of[t]) .. "}"
    end

    local function sorted_keys(t, path)
      local keys = {}
      for k in pairs(t) do
        if type(k) == "string" then
          if not valid_utf8(k) then
            raise("the table at %s has a key that is not valid UTF-8", where(path))
          end
        elseif type(k) ~= "number" or not finite(k) then
          raise("the table at %s has the key %s (keys must be strings or finite numbers)", where(path),
            tostring(k))
        end
        keys[#keys + 1] = k
      end
      sort(keys, key_before)
      return keys
    end

    local function value(v, name, path, depth)
      local tv = type(v)
      if tv == "boolean" then return tostring(v) end
      if tv == "number" then
        if finite(v) then return json.encode(v) end
        return format('{"number":"%s"}', v ~= v and "nan" or v > 0 and "inf" or "-inf")
      end
      if tv == "string" then
        if not valid_utf8(v) then raise("the string at %s is not valid UTF-8", path) end
        return encode_string(v)
      end
      if ember.is_tensor(v) then return tensor_ref(v, name, path) end
      if tv ~= "table" then
        raise("the value at %s is a %s (a checkpoint holds tensors, numbers, strings, booleans "
          .. "and tables of them)", path, tv)
      end
      local mt = getmetatable(v)
      if mt ~= nil and mt.__module then
        raise("the value at %s is a module (nn.%s): save its parameters and buffers with "
          .. "m:state_dict(), and load them back with m:load_state_dict(ember.load(path))", where(path),
          tostring(mt.__class.__name))
      end
      if mt ~= nil then
        raise("the table at %s has a metatable (an object, not data): a checkpoint holds tensors, "
          .. "numbers, strings, booleans and plain tables of them", where(path))
      end
      if open[v] then raise("the table at %s contains itself", path) end
      if depth > MAX_NESTING then raise("tables nested more than %d deep at %s", MAX_NESTING, path) end
      open[v] = true
      local parts = {}
      for i, k in ipairs(sorted_keys(v, path)) do
        local key = type(k) == "number" and json.encode(k) or encode_string(k)
        local part = type(k) == "number" and key or k
        parts[i] = format("[%s,%s]", key,
          value(v[k], name and name .. "." .. part or part, child_path(path, k), depth + 1))
      end
      open[v] = nil
      return '{"table":[' .. concat(parts, ",") .. "]}"
    end

    return value(tbl, nil, "", 1)
  end

  -- The nested table that the TREE_KEY text describes, over the file's tensors
  -- (entry name -> tensor), each of which it must place.
  local function decode_tree(text, tensors)
    local ok, tree = pcall(json.decode, text)
    if not ok then raise("%s: %s", TREE_KEY, tree) end
    local used = {}
    local function bad(path, what, ...)
      raise("%s: %s at %s", TREE_KEY, format(what, ...), where(path))
    end

    local function value(node, path)
      if type(node) ~= "table" then return node end   -- a boolean, string or number
      if getmetatable(node) ~= OBJECT then bad(path, "an array or null where a value belongs") end
      local tag, arg = next(node)
      if tag == nil or next(node, tag) ~= nil then bad(path, "an object that is not {tag: value}") end
      if tag == "number" then return NONFINITE[arg] or bad(path, "the number %s", tostring(arg)) end
      if tag == "tensor" then
        if tensors[arg] == nil then
          bad(path, "the tensor '%s', which the file does not hold", tostring(arg))
        end
        used[arg] = true
        return tensors[arg]
      end
      if tag ~= "table" or getmetatable(arg) ~= ARRAY then
        bad(path, "an unknown value {%q: ...}", tag)
      end
      local t = {}
      for _, pair in ipairs(arg) do
        local k = getmetatable(pair) == ARRAY and #pair == 2 and pair[1]
        if type(k) ~= "string" and type(k) ~= "number" then
          bad(path, "an entry that is not [key, value]")
        end
        if t[k] ~= nil then bad(path, "the key %s twice", json.encode(k)) end
        t[k] = value(pair[2], child_path(path, k))
      end
      return t
    end

    local root = value(tree, "")
    if type(root) ~= "table" or ember.is_tensor(root) then
      raise("%s: the top level is not a table", TREE_KEY)
    end
    for name in pairs(tensors) do
      if not used[name] then raise("%s does not place the tensor '%s'", TREE_KEY, name) end
    end
    return root
  end

  -- The user's metadata as sorted key, value strings, with the structure of a
  -- nested table (when there is one) under TREE_KEY; nil when there is neither.
  local function encode_metadata(metadata, tree)
    if metadata == nil and tree == nil then return nil end
    if metadata ~= nil and type(metadata) ~= "table" then
      raise("metadata must be a table, got %s", type(metadata))
    end
    local md = {}
    for k, v in pairs(metadata or {}) do
      if type(k) ~= "string" then raise("metadata keys must be strings, got a %s key", type(k)) end
      if k == TREE_KEY then
        raise("metadata key '%s' is reserved for the structure of nested tables", k)
      end
      local tv = type(v)
      if tv == "number" then
        v = (v == floor(v) and math.abs(v) < MAX_INT) and format("%.0f", v) or format("%.17g", v)
      elseif tv == "boolean" then
        v = tostring(v)
      elseif tv ~= "string" then
        raise("metadata value of '%s' must be a string, got %s", k, tv)
      end
      md[k] = v
    end
    md[TREE_KEY] = tree
    local keys = {}
    for k in pairs(md) do keys[#keys + 1] = k end
    sort(keys)
    local kv = ffi.new("ember_st_kv[?]", #keys)
    for i, k in ipairs(keys) do
      local e = kv[i - 1]
      e.key, e.key_len, e.value, e.value_len = k, #k, md[k], #md[k]
    end
    return kv, #keys, md   -- md keeps the strings kv points into alive
  end

  -- The entries of a flat name -> tensor table, sorted by name.
  local function encode_entries(tbl)
    local names = {}
    for k, v in pairs(tbl) do
      if type(k) ~= "string" then raise("keys must be strings, got a %s key", type(k)) end
      if tensor_ptr(v) == nil then
        if ember.is_tensor(v) then raise("tensor '%s' was freed", k) end
        raise("value of '%s' is not a tensor (got %s)", k, type(v))
      end
      names[#names + 1] = k
    end
    sort(names)
    local entries = ffi.new("ember_st_named[?]", #names)
    for i, name in ipairs(names) do
      local e = entries[i - 1]
      e.name, e.name_len, e.tensor = name, #name, tensor_ptr(tbl[name])
    end
    return entries, #names
  end

  -- ember.save(path, tbl, metadata?): tbl is flat name -> tensor (written as it
  -- is) or nested (see TREE_KEY). Keys sorted in the header; the codec writes
  -- the file next to `path`, fsyncs it and renames it over it, so a failure at
  -- any point leaves the old file as it was.
  function M.save(path, tbl, metadata)
    check_path("save", path)
    boundary("save", path, function()
      if type(tbl) ~= "table" or ember.is_tensor(tbl) then
        raise("expected a table, got %s", ember.is_tensor(tbl) and "a tensor" or type(tbl))
      end
      local tensors, tree = tbl, nil
      if not is_flat(tbl) then
        tensors = {}
        tree = encode_tree(tbl, tensors)
      end
      local entries, n = encode_entries(tensors)
      local kv, nmeta, keep = encode_metadata(metadata, tree)
      local rc = C.ember_st_save(path, n, entries, kv and nmeta or -1, kv)
      if rc < 0 then raise_c(path) end
      return keep, tensors   -- alive until the codec is done with their strings and tensors
    end)
    return path
  end

  ---------------------------------------------------------------- load
  local file_out = ffi.new("ember_st_file *[1]")
  local out1 = ffi.new("ember_tensor *[1]")
  local str_p, str_p2 = ffi.new("const char *[1]"), ffi.new("const char *[1]")
  local len_p, len_p2 = ffi.new("size_t[1]"), ffi.new("size_t[1]")
  local dtype_p, ndim_p = ffi.new("int[1]"), ffi.new("int[1]")
  local shape_p = ffi.new("const int64_t *[1]")
  local begin_p, end_p = ffi.new("uint64_t[1]"), ffi.new("uint64_t[1]")

  -- Opens path with the codec, which reads and checks the header, and runs
  -- fn(file, metadata) inside op's boundary; the file is closed after.
  local function with_file(op, path, fn)
    check_path(op, path)
    return boundary(op, path, function()
      if C.ember_st_open(path, file_out) < 0 then raise_c(path) end
      local f = ffi.gc(file_out[0], C.ember_st_close)
      local metadata = {}
      for i = 0, C.ember_st_meta_count(f) - 1 do
        C.ember_st_meta(f, i, str_p, len_p, str_p2, len_p2)
        metadata[ffi.string(str_p[0], len_p[0])] = ffi.string(str_p2[0], len_p2[0])
      end
      local ok, a, b = pcall(fn, f, metadata)
      C.ember_st_close(ffi.gc(f, nil))
      if not ok then error(a, 0) end
      return a, b
    end)
  end

  -- entry i of an open file: name, dtype id, shape (a list), begin, end
  local function entry(f, i)
    C.ember_st_entry(f, i, str_p, len_p, dtype_p, ndim_p, shape_p, begin_p, end_p)
    local shape = {}
    for d = 1, ndim_p[0] do shape[d] = tonumber(shape_p[0][d - 1]) end
    return ffi.string(str_p[0], len_p[0]), dtype_p[0], shape, tonumber(begin_p[0]), tonumber(end_p[0])
  end

  -- ember.load(path, {device = ...}?) -> {name = tensor} (or the nested table
  -- that was saved), metadata
  function M.load(path, opts)
    if opts ~= nil and type(opts) ~= "table" then errors.fail("load", "options must be a table, got " .. type(opts)) end
    errors.known_options("load", opts, { "device" })
    local device = type(opts) == "table" and opts.device or nil
    return with_file("load", path, function(f, metadata)
      local result = {}
      for i = 0, C.ember_st_count(f) - 1 do
        local name = entry(f, i)
        if C.ember_st_read(f, i, out1) < 0 then raise_c(path) end
        local t = ember._wrap(out1[0])
        if device and device ~= "cpu" then t = t:to(device) end
        result[name] = t
      end
      local tree = metadata[TREE_KEY]
      if tree == nil then return result, metadata end
      metadata[TREE_KEY] = nil
      return decode_tree(tree, result), metadata
    end)
  end

  -- ember.io.header(path) -> {name = {dtype =, shape =, data_offsets =}}, metadata,
  -- validated exactly as load does, without reading the data.
  function M.header(path)
    return with_file("io.header", path, function(f, metadata)
      local r = {}
      for i = 0, C.ember_st_count(f) - 1 do
        local name, dt, shape, b, e = entry(f, i)
        r[name] = { dtype = ember._DTYPES[dt + 1], shape = shape, data_offsets = { b, e } }
      end
      return r, metadata
    end)
  end

  ember.save, ember.load = M.save, M.load
  package.loaded["ember.io"] = M
  return M
end
