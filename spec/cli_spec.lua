-- The ember command (cli/): scripts with arguments and exit codes, -e, -v,
-- errors with tracebacks, finding the Lua package with no environment
-- variables, and the REPL, both from a pipe and on a real pseudo-terminal
-- (expressions, a wrong line, Ctrl-C in a loop, multi-line input, tab
-- completion, Ctrl-D). Runs build/cli/ember, or $EMBER_BUILD_DIR/cli/ember.
local U = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".")
  .. "/../cli/tests/spec_util.lua")

local ember_bin, missing = U.built("cli/ember")

describe("the ember command", function()
  if not ember_bin then pending(missing) return end

  local tmp
  setup(function() tmp = U.tmpdir() end)
  teardown(function() U.rm_rf(tmp) end)

  local function script(name, text)
    local path = tmp .. "/" .. name
    U.write(path, text)
    return path
  end

  describe("running a script", function()
    it("preloads ember and sets arg as luajit does", function()
      local path = script("args.lua", [[
        local n = select("#", ...)
        print("arg0=" .. arg[0], "arg1=" .. arg[1], "arg2=" .. arg[2], "#arg=" .. #arg, "n=" .. n)
        print("arg-1=" .. arg[-1])
        print("sum=" .. ember.ones({2, 3}):sum():item(), rawequal(ember, require("ember")))
      ]])
      local r = U.run({ ember_bin, path, "one", "two words" })
      assert.are.equal(0, r.rc, r.err)
      assert.matches("arg0=" .. path, r.out, 1, true)
      assert.matches("arg1=one\targ2=two words\t#arg=2\tn=2", r.out, 1, true)
      assert.matches("arg-1=" .. ember_bin, r.out, 1, true)
      assert.matches("sum=6\ttrue", r.out, 1, true)
    end)

    it("exits with the status the script gives os.exit", function()
      local path = script("exit.lua", "os.exit(tonumber(arg[1]) or arg[1] == 'true')")
      assert.are.equal(3, U.run({ ember_bin, path, "3" }).rc)
      assert.are.equal(0, U.run({ ember_bin, path, "0" }).rc)
      assert.are.equal(0, U.run({ ember_bin, path, "true" }).rc)
      assert.are.equal(0, U.run({ ember_bin, script("ok.lua", "local x = 1") }).rc)
    end)

    it("prints an uncaught error with its traceback to stderr and exits 1", function()
      local path = script("boom.lua", [[
        local function inner() error("boom: bad thing") end
        local function outer() inner() end
        print("before")
        outer()
        print("never")
      ]])
      local r = U.run({ ember_bin, path })
      assert.are.equal(1, r.rc)
      assert.are.equal("before\n", r.out)
      assert.matches("boom.lua:1: boom: bad thing", r.err, 1, true)
      assert.matches("stack traceback:", r.err, 1, true)
      assert.matches("in function 'outer'", r.err, 1, true)
    end)

    it("reports an ember error raised in a script", function()
      local r = U.run({ ember_bin, script("shapes.lua", "local x = ember.ones({2, 3}) + ember.ones({4})") })
      assert.are.equal(1, r.rc)
      assert.matches("ember.add: shapes {2, 3} and {4} cannot be broadcast", r.err, 1, true)
    end)

    it("reports a syntax error and a missing script", function()
      local r = U.run({ ember_bin, script("syntax.lua", "x = = 1") })
      assert.are.equal(1, r.rc)
      assert.matches("syntax.lua:1:", r.err, 1, true)
      r = U.run({ ember_bin, tmp .. "/nonexistent.lua" })
      assert.are.equal(1, r.rc)
      assert.matches("cannot open", r.err, 1, true)
    end)

    it("reads the script from stdin with -", function()
      local r = U.run({ ember_bin, "-", "x" }, { stdin = "print(ember.tensor({1, 2}):sum():item(), ...)" })
      assert.are.equal(0, r.rc, r.err)
      assert.are.equal("3\tx\n", r.out)
    end)

    it("finds the Lua package and libember with no environment, from any folder", function()
      local r = U.run({ ember_bin, "-e", "print(ember._libpath)" },
        { cwd = tmp, env = { LUA_PATH = false, LUA_CPATH = false, LD_LIBRARY_PATH = false } })
      assert.are.equal(0, r.rc, r.err)
      assert.matches("libember", r.out, 1, true)
    end)
  end)

  describe("-e, -l, -v and options", function()
    it("runs -e chunks in order, then the script", function()
      local path = script("after.lua", "print('script', x)")
      local r = U.run({ ember_bin, "-e", "x = 1", "-e", "x = x + 1; print('e', x)", path })
      assert.are.equal(0, r.rc, r.err)
      assert.are.equal("e\t2\nscript\t2\n", r.out)
    end)

    it("prints tensors from -e and exits 1 on an error there", function()
      local r = U.run({ ember_bin, "-e", "print(ember.eye(2))" })
      assert.are.equal(0, r.rc, r.err)
      assert.matches("tensor(", r.out, 1, true)
      assert.matches("shape={2, 2}", r.out, 1, true)
      r = U.run({ ember_bin, "-e", "error('from -e')" })
      assert.are.equal(1, r.rc)
      assert.matches("from -e", r.err, 1, true)
      r = U.run({ ember_bin, "-e", "x = = 1" })
      assert.are.equal(1, r.rc)
      assert.matches("unexpected symbol", r.err, 1, true)
    end)

    it("requires a library with -l", function()
      local r = U.run({ ember_bin, "-l", "string", "-e", "print(string.rep('a', 3))" })
      assert.are.equal(0, r.rc, r.err)
      assert.are.equal("aaa\n", r.out)
    end)

    it("prints the versions of ember, LuaJIT, BLAS and CUDA with -v", function()
      local r = U.run({ ember_bin, "-v" })
      assert.are.equal(0, r.rc, r.err)
      assert.matches("^ember %d+%.%d+%.%d+\n", r.out)
      assert.matches("LuaJIT 2%.", r.out)
      assert.matches("BLAS: ", r.out, 1, true)
      assert.matches("CUDA: ", r.out, 1, true)
    end)

    it("rejects an unknown option with the usage and status 1", function()
      local r = U.run({ ember_bin, "--frobnicate" })
      assert.are.equal(1, r.rc)
      assert.matches("unrecognized option", r.err, 1, true)
      assert.matches("usage:", r.err, 1, true)
      r = U.run({ ember_bin, "-e" })
      assert.are.equal(1, r.rc)
      assert.matches("needs an argument", r.err, 1, true)
    end)
  end)

  describe("the REPL, reading a pipe", function()
    it("prints values, goes on after errors, joins incomplete lines", function()
      local input = table.concat({
        "ember.ones({2, 2})",
        "1, 'two', {1, 2, x = 3}",
        "x = = 1",
        "error('oops')",
        "function sq(v)",
        "  return v * v",
        "end",
        "sq(7)",
        "local t = ember.zeros({3}) return t:sum():item()",
        "",
      }, "\n")
      local r = U.run({ ember_bin }, { stdin = input })
      assert.are.equal(0, r.rc, r.err)
      assert.matches("tensor([[1., 1.],", r.out, 1, true)
      assert.matches("shape={2, 2}", r.out, 1, true)
      assert.matches("1\ttwo\t{1, 2, x = 3}", r.out, 1, true)
      assert.matches("\n49\n", r.out, 1, true)
      assert.matches("\n0\n", r.out, 1, true)
      assert.matches("stdin:1: unexpected symbol near '='", r.err, 1, true)
      assert.matches("stdin:1: oops", r.err, 1, true)
      assert.matches("stack traceback:", r.err, 1, true)
    end)

    it("names line 1 for an error in a one-line expression; a comment after one still works", function()
      local r = U.run({ ember_bin }, { stdin = "ember.nn.Linaer\n1 + 1 -- two\nember.zeross -- z\n" })
      assert.are.equal(0, r.rc, r.err)
      assert.are.equal("2\n", r.out)
      assert.matches("stdin:1: ember.nn: no field 'Linaer' (did you mean Linear?)", r.err, 1, true)
      assert.matches("ember: no field 'zeross' (did you mean zeros?)", r.err, 1, true)
    end)

    it("opens after a script with -i", function()
      local path = script("pre.lua", "answer = 42")
      local r = U.run({ ember_bin, "-i", path }, { stdin = "answer + 1\n" })
      assert.are.equal(0, r.rc, r.err)
      assert.are.equal("43\n", r.out)
    end)
  end)

  describe("the REPL on a terminal", function()
    if not U.have_script() then pending("util-linux `script` is not installed: no pseudo-terminal test") return end

    -- runs fn(s, expect) against the REPL on a pseudo-terminal with a HOME of
    -- its own; returns the exit status and what the history file holds
    local function session(fn)
      local home = U.tmpdir()
      local s = U.pty({ ember_bin }, { HOME = home })
      local ok, err = pcall(fn, s, function(text, timeout) assert(s:expect(text, timeout)) end)
      local rc = s:close()
      local history = U.read(home .. "/.ember_history") or ""
      U.rm_rf(home)
      assert(ok, err)
      return rc, history
    end

    it("edits lines, prints values, survives errors and Ctrl-C, completes names, exits on Ctrl-D",
      function()
        local rc, history = session(function(s, expect)
          expect("Ctrl-D exits")
          expect("> ")

          s:send("ember.ones({2, 3}) * 2\r")
          expect("tensor([[2., 2., 2.],")
          expect("shape={2, 3}")

          s:send("x = = 1\r")            -- a line that does not parse
          expect("unexpected symbol near '='")
          s:send("6 * 7\r")              -- then a valid one
          expect("\n42")

          s:send("error('boom')\r")
          expect("boom")
          expect("stack traceback")

          s:send("while true do end\r")  -- Ctrl-C stops it; the session goes on
          expect("while true do end")
          U.sleep(0.5)
          s:send("\003")
          expect("interrupted", 15)
          s:send("print(40 + 3)\r")
          expect("\n43")

          s:send("function cube(v)\r")   -- a chunk over two lines
          expect(">> ")
          s:send("return v ^ 3 end\r")
          s:send("cube(3)\r")
          expect("27")

          s:send("ember.zeros_li\t")     -- tab completes to ember.zeros_like
          U.sleep(0.3)
          s:send("(ember.ones({4}))\r")
          expect("tensor([0., 0., 0., 0.]")

          s:send("\004")                 -- Ctrl-D ends the session
        end)
        assert.are.equal(0, rc)
        assert.matches("cube(3)", history, 1, true)
      end)

    it("documents names with ?name and help(x), prints `= expr` as luajit, suggests misspelt names",
      function()
        local rc = session(function(s, expect)
          expect("Ctrl-D exits")
          s:send("?ember.nn.Linear\r")
          expect("ember.nn.Linear(in_features, out_features, opts?)")
          expect("(docs/api.md, ember.nn: layers)")

          s:send("help(ember.optim.SGD)\r")
          expect("ember.optim.SGD(params, opts?)")
          expect("nesterov = false")

          s:send("x = ember.ones({2})\r")
          s:send("?x.sum\r")             -- the value an expression gives
          expect("Tensor:sum(dim?, keepdim?)")

          s:send("= 1 + 1, 'two', nil\r")
          expect("\n2\ttwo\tnil")
          s:send("= ember.nn.functional\r")   -- a table prints as its address
          expect("table: 0x")

          s:send("ember.nn.Linaer(2, 3)\r")
          expect("ember.nn: no field 'Linaer' (did you mean Linear?)")
          s:send("F = ember.nn.functional\r")
          s:send("F.cross_entropyy\r")
          expect("ember.nn.functional: no field 'cross_entropyy' (did you mean cross_entropy?)")
          s:send("?ember.optim.Adma\r")
          expect("no entry for 'ember.optim.Adma' (did you mean ember.optim.Adam?)")

          s:send("ember\r")                -- public names first
          expect("{Generator = ")
          expect("Tensor = {...}, abs = ")
          s:send("\004")
        end)
        assert.are.equal(0, rc)
      end)
  end)
end)
