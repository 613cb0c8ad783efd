-- wrk script: POST a canned body read from a file, optionally naming a
-- different tenant (X-Scope-OrgID t<n>) on every request, round-robin.
--   wrk -s wrk-post.lua URL -- BODY_FILE [TENANTS] [CONTENT_TYPE]
-- Requests are formatted once in init() when they fit in 64 MiB, else per request.

local body, tenants, ctype, counter, canned

function init(args)
  local f = assert(io.open(args[1], "rb"))
  body = f:read("*a")
  f:close()
  tenants = tonumber(args[2] or "0") or 0
  ctype = args[3] or "application/x-protobuf"
  counter = 0
  wrk.method = "POST"
  wrk.body = body
  wrk.headers["Content-Type"] = ctype
  if tenants > 0 and #body * tenants <= 64 * 1024 * 1024 then
    canned = {}
    for i = 0, tenants - 1 do
      canned[i] = wrk.format("POST", nil, { ["Content-Type"] = ctype, ["X-Scope-OrgID"] = "t" .. i }, body)
    end
  end
end

function request()
  if tenants <= 0 then
    return wrk.request()
  end
  local i = counter % tenants
  counter = counter + 1
  if canned then
    return canned[i]
  end
  return wrk.format("POST", nil, { ["Content-Type"] = ctype, ["X-Scope-OrgID"] = "t" .. i }, body)
end
