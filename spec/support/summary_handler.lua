-- busted output handler: the usual plain report, then one closing line
-- "N passed, N failed, N skipped" (failed = failures + errors) that CI reads.
return function(options)
  local busted = require("busted")
  local handler = require("busted.outputHandlers.plainTerminal")(options)
  busted.subscribe({ "suite", "end" }, function()
    io.write(string.format("\n%d passed, %d failed, %d skipped\n",
      handler.successesCount,
      handler.failuresCount + handler.errorsCount,
      handler.pendingsCount))
    io.flush()
    return nil, true
  end)
  return handler
end
