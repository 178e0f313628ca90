-- ember.save / ember.load: tensors in the safetensors format, written
-- atomically and read defensively; the header's JSON goes through ember.json.
-- Flat name -> tensor tables are written as they are; a nested table of
-- tensors, numbers, strings and booleans (a whole training checkpoint) keeps
-- its tensors as ordinary entries and its structure in the metadata, so any
-- safetensors reader still gets the tensors.
--
-- File layout (little-endian): u64 N | N bytes of JSON header, padded with
-- spaces to a multiple of 8 | the raw tensor bytes, tiled in header order.
local ffi = require("ffi")
local bit = require("bit")
local json = require("ember.json")

-- libc through renamed symbols, so the declarations never clash with another
-- module's (a function may be declared any number of times; pcall all the same).
pcall(ffi.cdef, [[
int ember_io_open(const char *path, int flags, int mode) __asm__("open");
int ember_io_close(int fd) __asm__("close");
long ember_io_write(int fd, const void *buf, size_t n) __asm__("write");
long ember_io_pread(int fd, void *buf, size_t n, int64_t off) __asm__("pread64");
int64_t ember_io_lseek(int fd, int64_t off, int whence) __asm__("lseek64");
int ember_io_fsync(int fd) __asm__("fsync");
int ember_io_rename(const char *from, const char *to) __asm__("rename");
int ember_io_unlink(const char *path) __asm__("unlink");
int ember_io_getpid(void) __asm__("getpid");
char *ember_io_strerror(int errnum) __asm__("strerror");
]])

-- Linux open(2) flags (identical on x86-64 and arm64)
local O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_TRUNC = 0, 1, 0x40, 0x80, 0x200
local O_CLOEXEC, O_DIRECTORY = 0x80000, 0x10000
local EINTR, EEXIST = 4, 17
local SEEK_END = 2
local MAX_HEADER = 100 * 1000 * 1000
local MAX_INT = 2 ^ 53

local byte, char, find, format = string.byte, string.char, string.find, string.format
local concat, sort = table.concat, table.sort
local floor = math.floor
local OBJECT, ARRAY = json.OBJECT, json.ARRAY
local errors = require("ember.errors")
local valid_utf8, encode_string = json.valid_utf8, json.encode_string

---------------------------------------------------------------- the module
return function(ember)
  local C = ember._C
  local M = { json = json, MAX_HEADER = MAX_HEADER }

  -- safetensors dtype <-> ember dtype
  local ST_TO_EMBER = { F32 = "float32", F64 = "float64", F16 = "float16", BF16 = "bfloat16",
    I32 = "int32", I64 = "int64", U8 = "uint8", BOOL = "bool" }
  local EMBER_TO_ST = {}
  for k, v in pairs(ST_TO_EMBER) do EMBER_TO_ST[v] = k end
  M.DTYPES = ST_TO_EMBER
  local DTYPE_ID = ember._DTYPE_ID
  local UINT8, BOOL = DTYPE_ID.uint8, DTYPE_ID.bool

  local out1 = ffi.new("ember_tensor *[1]")
  local shape_buf = ffi.new("int64_t[8]")

  local function errstr(e) return ffi.string(C.ember_io_strerror(e or ffi.errno())) end

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

  local function le_u64(n)
    local b = {}
    for i = 1, 8 do b[i] = n % 256; n = floor(n / 256) end
    return char(unpack(b))
  end

  -- Writes exactly n bytes from buf; retries partial writes and EINTR.
  -- (A field of M, so a spec can replace it to simulate a failing disk.)
  function M._write(fd, buf, n)
    local p = ffi.cast("const uint8_t *", buf)
    local done = 0
    while done < n do
      local chunk = math.min(n - done, 2 ^ 30)
      local r = tonumber(C.ember_io_write(fd, p + done, chunk))
      if r < 0 then
        local e = ffi.errno()
        if e ~= EINTR then raise("write failed: %s", errstr(e)) end
      elseif r == 0 then
        raise("write failed: no progress")
      else
        done = done + r
      end
    end
  end

  local tmp_counter = 0
  local function open_temp(path)
    local pid = C.ember_io_getpid()
    for _ = 1, 16 do
      tmp_counter = tmp_counter + 1
      local suffix = format(".tmp.%d.%x%04x", pid, tmp_counter,
        floor((os.clock() * 1e6 + os.time()) % 65536))
      local tmp = path .. suffix
      local fd = C.ember_io_open(tmp, bit.bor(O_WRONLY, O_CREAT, O_EXCL, O_TRUNC, O_CLOEXEC), 438)
      if fd >= 0 then return fd, tmp end
      local e = ffi.errno()
      if e ~= EEXIST then raise("cannot create %s: %s", tmp, errstr(e)) end
    end
    raise("cannot create a temporary file next to it")
  end

  local function fsync_dir(path)
    local dir = path:match("^(.*)/[^/]*$")
    if dir == "" then dir = "/" end
    local fd = C.ember_io_open(dir or ".", bit.bor(O_RDONLY, O_DIRECTORY, O_CLOEXEC), 0)
    if fd >= 0 then
      C.ember_io_fsync(fd)   -- best effort: some file systems refuse directory fsync
      C.ember_io_close(fd)
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
        if name == "__metadata__" then raise("'__metadata__' is reserved and cannot name a tensor") end
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

  -- The user's metadata as string -> string, with the structure of a nested table
  -- (when there is one) under TREE_KEY.
  local function encode_metadata(metadata, tree)
    local md = setmetatable({}, OBJECT)
    if metadata ~= nil and type(metadata) ~= "table" then
      raise("metadata must be a table, got %s", type(metadata))
    end
    for k, v in pairs(metadata or {}) do
      if type(k) ~= "string" then raise("metadata keys must be strings, got a %s key", type(k)) end
      if not valid_utf8(k) then raise("metadata key %q is not valid UTF-8", k) end
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
      if not valid_utf8(v) then raise("metadata value of '%s' is not valid UTF-8", k) end
      md[k] = v
    end
    md[TREE_KEY] = tree
    return md
  end

  -- The header's JSON text and the list of entries, in file order:
  -- {"__metadata__":{...},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},...}
  local function build_header(tbl, metadata, tree)
    local names = {}
    for k, v in pairs(tbl) do
      if type(k) ~= "string" then raise("keys must be strings, got a %s key", type(k)) end
      if k == "__metadata__" then raise("'__metadata__' is reserved and cannot name a tensor") end
      if not valid_utf8(k) then raise("tensor name %q is not valid UTF-8", k) end
      if tensor_ptr(v) == nil then
        if ember.is_tensor(v) then raise("tensor '%s' was freed", k) end
        raise("value of '%s' is not a tensor (got %s)", k, type(v))
      end
      names[#names + 1] = k
    end
    sort(names)
    local parts, entries = {}, {}
    if metadata ~= nil or tree then
      parts[1] = '"__metadata__":' .. json.encode(encode_metadata(metadata, tree))
    end
    local offset = 0
    for _, name in ipairs(names) do
      local t = tbl[name]
      local c = tensor_ptr(t)
      local dt = C.ember_tensor_dtype(c)
      local nd, s = C.ember_tensor_ndim(c), C.ember_tensor_shape(c)
      local shape = {}
      for i = 1, nd do shape[i] = format("%.0f", tonumber(s[i - 1])) end
      local nbytes = tonumber(C.ember_tensor_numel(c)) * C.ember_dtype_size(dt)
      parts[#parts + 1] = format('%s:{"dtype":"%s","shape":[%s],"data_offsets":[%.0f,%.0f]}',
        encode_string(name), EMBER_TO_ST[ember._DTYPES[dt + 1]], concat(shape, ","),
        offset, offset + nbytes)
      entries[#entries + 1] = { name = name, tensor = t, nbytes = nbytes }
      offset = offset + nbytes
    end
    return "{" .. concat(parts, ",") .. "}", entries
  end

  local function write_all(fd, header_json, entries)
    local n = #header_json
    local pad = (8 - n % 8) % 8
    local head = le_u64(n + pad) .. header_json .. string.rep(" ", pad)
    M._write(fd, head, #head)
    for _, e in ipairs(entries) do
      if e.nbytes > 0 then
        local t = e.tensor
        if t.device ~= "cpu" then t = t:to("cpu") end
        t = t:contiguous()
        local p = C.ember_tensor_data(t._c)
        if p == nil then raise("no host data for tensor '%s'", e.name) end
        M._write(fd, p, e.nbytes)
      end
    end
  end

  -- ember.save(path, tbl, metadata?): tbl is flat name -> tensor (written as it
  -- is) or nested (see TREE_KEY). Keys sorted in the header; the file is written
  -- next to `path`, fsync'ed and renamed over it, so a failure at any point
  -- leaves the old file as it was.
  function M.save(path, tbl, metadata)
    if type(path) ~= "string" or path == "" then
      errors.fail("save", "expected a file path, got " .. type(path))
    end
    if not ffi.abi("le") then
      errors.fail("save", path .. ": big-endian hosts are not supported")
    end
    local fd, tmp
    local ok, err = pcall(function()
      if type(tbl) ~= "table" or ember.is_tensor(tbl) then
        raise("expected a table, got %s", ember.is_tensor(tbl) and "a tensor" or type(tbl))
      end
      local tensors, tree = tbl, nil
      if not is_flat(tbl) then
        tensors = {}
        tree = encode_tree(tbl, tensors)
      end
      local header_json, entries = build_header(tensors, metadata, tree)
      C.ember_remove_stale_temps(path)   -- what a writer killed mid-save left beside the file
      fd, tmp = open_temp(path)
      write_all(fd, header_json, entries)
      if C.ember_io_fsync(fd) ~= 0 then raise("fsync failed: %s", errstr()) end
      local rc = C.ember_io_close(fd)
      fd = nil
      if rc ~= 0 then raise("close failed: %s", errstr()) end
      if C.ember_io_rename(tmp, path) ~= 0 then raise("cannot rename %s over it: %s", tmp, errstr()) end
      tmp = nil
      fsync_dir(path)
    end)
    if not ok then
      if fd then C.ember_io_close(fd) end
      if tmp then C.ember_io_unlink(tmp) end
      err = tostring(err)
      local prefix = "ember.save: " .. path .. ": "
      if err:sub(1, #prefix) ~= prefix then err = prefix .. err end
      errors.raise(err)
    end
    return path
  end

  ---------------------------------------------------------------- load
  local function read_at(fd, buf, n, off)
    local p = ffi.cast("uint8_t *", buf)
    local done = 0
    while done < n do
      local chunk = math.min(n - done, 2 ^ 30)
      local r = tonumber(C.ember_io_pread(fd, p + done, chunk, off + done))
      if r < 0 then
        local e = ffi.errno()
        if e ~= EINTR then raise("read failed: %s", errstr(e)) end
      elseif r == 0 then
        raise("truncated: expected %d bytes at offset %d, got %d", n, off, done)
      else
        done = done + r
      end
    end
  end

  local function is_uint(v) return type(v) == "number" and v == floor(v) and v >= 0 and v <= MAX_INT end

  -- Checks one header entry; returns {name, dtype, shape, begin, end}.
  local function check_entry(name, info)
    if type(info) ~= "table" or getmetatable(info) ~= OBJECT then
      raise("entry '%s' is not an object", name)
    end
    local st = info.dtype
    if type(st) ~= "string" then raise("tensor '%s': dtype missing or not a string", name) end
    local dt = ST_TO_EMBER[st]
    if not dt then raise("tensor '%s': unknown dtype '%s'", name, st) end
    local shape = info.shape
    if type(shape) ~= "table" or getmetatable(shape) ~= ARRAY then
      raise("tensor '%s': shape missing or not an array", name)
    end
    if #shape > 8 then raise("tensor '%s': %d dims (at most 8 are supported)", name, #shape) end
    local numel = 1
    for i = 1, #shape do
      local d = shape[i]
      if not is_uint(d) then
        raise("tensor '%s': bad size %s at position %d of the shape", name, tostring(d), i)
      end
      numel = numel * d
    end
    if numel > MAX_INT then raise("tensor '%s': absurd shape (%g elements)", name, numel) end
    local offs = info.data_offsets
    if type(offs) ~= "table" or getmetatable(offs) ~= ARRAY or #offs ~= 2
      or not is_uint(offs[1]) or not is_uint(offs[2]) then
      raise("tensor '%s': data_offsets must be an array of two non-negative integers", name)
    end
    local b, e = offs[1], offs[2]
    if e < b then raise("tensor '%s': data_offsets [%d,%d] end before they begin", name, b, e) end
    local need = numel * C.ember_dtype_size(DTYPE_ID[dt])
    if e - b ~= need then
      raise("tensor '%s': data_offsets [%d,%d] hold %d bytes but %s of shape {%s} needs %d",
        name, b, e, e - b, st, concat(shape, ","), need)
    end
    return { name = name, dtype = dt, shape = shape, b = b, e = e }
  end

  -- Parses and validates the header of an open file; returns the entries
  -- (sorted by offset), the metadata table and the data start.
  local function read_header(fd)
    local size = tonumber(C.ember_io_lseek(fd, 0, SEEK_END))
    if size < 0 then raise("cannot seek: %s", errstr()) end
    if size < 8 then raise("file too short (%d bytes) to hold a safetensors header", size) end
    local b8 = ffi.new("uint8_t[8]")
    read_at(fd, b8, 8, 0)
    local n = 0
    for i = 7, 0, -1 do n = n * 256 + b8[i] end
    if n > MAX_HEADER then raise("header length %.0f exceeds the %d MB limit", n, MAX_HEADER / 1e6) end
    if n > size - 8 then raise("header length %d exceeds the file size (%d bytes)", n, size) end
    if n < 2 then raise("header length %d is too small", n) end
    local hbuf = ffi.new("uint8_t[?]", n)
    read_at(fd, hbuf, n, 8)
    local text = ffi.string(hbuf, n)
    if byte(text, 1) ~= 123 then raise("header is not a JSON object (it does not start with '{')") end
    local ok, header = pcall(json.decode, text)
    if not ok then raise("header: %s", header) end
    if getmetatable(header) ~= OBJECT then raise("header is not a JSON object") end
    local metadata = {}
    local entries = {}
    for k, v in pairs(header) do
      if k == "__metadata__" then
        if getmetatable(v) ~= OBJECT then raise("__metadata__ is not an object") end
        for mk, mv in pairs(v) do
          if type(mv) ~= "string" then raise("__metadata__ value of '%s' is not a string", mk) end
          metadata[mk] = mv
        end
      else
        entries[#entries + 1] = check_entry(k, v)
      end
    end
    sort(entries, function(x, y)
      if x.b ~= y.b then return x.b < y.b end
      if x.e ~= y.e then return x.e < y.e end
      return x.name < y.name
    end)
    -- safetensors: the ranges tile the data buffer exactly, in order
    local data_start = 8 + n
    local data_len = size - data_start
    local cursor = 0
    for _, en in ipairs(entries) do
      if en.e > data_len then
        raise("tensor '%s': data_offsets [%d,%d] go past the end of the data "
          .. "(%d bytes; truncated file?)", en.name, en.b, en.e, data_len)
      end
      if en.b < cursor then
        raise("tensor '%s': data_offsets [%d,%d] overlap the previous tensor (which ends at %d)",
          en.name, en.b, en.e, cursor)
      elseif en.b > cursor then
        raise("tensor '%s': data_offsets [%d,%d] leave a gap after byte %d",
          en.name, en.b, en.e, cursor)
      end
      cursor = en.e
    end
    if cursor ~= data_len then
      raise("%d unexpected bytes after the last tensor (data is %d bytes, tensors cover %d)",
        data_len - cursor, data_len, cursor)
    end
    return entries, metadata, data_start
  end

  local function with_file(op, path, fn)
    if type(path) ~= "string" or path == "" then
      errors.fail(op, "expected a file path, got " .. type(path))
    end
    if not ffi.abi("le") then
      errors.fail(op, path .. ": big-endian hosts are not supported")
    end
    local fd = C.ember_io_open(path, bit.bor(O_RDONLY, O_CLOEXEC), 0)
    if fd < 0 then errors.fail(op, format("%s: cannot open: %s", path, errstr())) end
    local res = { pcall(fn, fd) }
    C.ember_io_close(fd)
    if not res[1] then
      local err = tostring(res[2])
      local prefix = "ember." .. op .. ": " .. path .. ": "
      if err:sub(1, #prefix) ~= prefix then err = prefix .. err end
      errors.raise(err)
    end
    return unpack(res, 2, 3)
  end

  -- ember.load(path, {device = ...}?) -> {name = tensor} (or the nested table
  -- that was saved), metadata
  function M.load(path, opts)
    if opts ~= nil and type(opts) ~= "table" then errors.fail("load", "options must be a table, got " .. type(opts)) end
    errors.known_options("load", opts, { "device" })
    local device = type(opts) == "table" and opts.device or nil
    return with_file("load", path, function(fd)
      local entries, metadata, data_start = read_header(fd)
      local result = {}
      for _, en in ipairs(entries) do
        local shape = en.shape
        for i = 1, #shape do shape_buf[i - 1] = shape[i] end
        local dt = DTYPE_ID[en.dtype]
        -- bools arrive as bytes and are normalised to 0/1 by the conversion
        local rc = C.ember_empty(#shape, shape_buf, dt == BOOL and UINT8 or dt, 0, out1)
        if rc < 0 then raise("tensor '%s': %s", en.name, ffi.string(C.ember_last_error())) end
        local t = ember._wrap(out1[0])
        if en.e > en.b then read_at(fd, C.ember_tensor_data(t._c), en.e - en.b, data_start + en.b) end
        if dt == BOOL then t = t:to("bool") end
        if device and device ~= "cpu" then t = t:to(device) end
        result[en.name] = t
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
    return with_file("io.header", path, function(fd)
      local entries, metadata = read_header(fd)
      local r = {}
      for _, en in ipairs(entries) do
        local shape = {}
        for i = 1, #en.shape do shape[i] = en.shape[i] end
        r[en.name] = { dtype = en.dtype, shape = shape, data_offsets = { en.b, en.e } }
      end
      return r, metadata
    end)
  end

  ember.save, ember.load = M.save, M.load
  package.loaded["ember.io"] = M
  return M
end
