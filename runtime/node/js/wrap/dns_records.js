// node:dns, part 3 of 4 (see dns.js): the DoH client and record parsing.
// ---------------------------------------------------------------------------
// The DNS-over-HTTPS client (internal_dns_client).

async function query(name, type) {
  const url = new URL("https://cloudflare-dns.com/dns-query");
  url.searchParams.set("name", name);
  url.searchParams.set("type", type);
  // e.g. queryA, queryAAAA, queryTXT: the first letter upper-cased, the rest as is.
  const syscall = `query${type.at(0)?.toUpperCase()}${type.slice(1)}`;

  let json;
  try {
    const doFetch = globalThis.fetch;
    const response = await doFetch(url, {
      headers: { Accept: "application/dns-json" },
      method: "GET",
    });
    if (!response.ok) throw new DnsError(name, BADRESP, syscall);
    json = await response.json();
  } catch (e) {
    throw e instanceof DnsError ? e : new DnsError(name, BADQUERY, syscall);
  }
  if ("error" in json) throw new DnsError(name, BADRESP, syscall);
  // Callers rely on a Question section being there.
  const question = json.Question.at(0);
  if (!question) throw new DnsError(name, BADRESP, syscall);
  if (json.Answer?.at(0)?.name === "") throw new DnsError(name, NOTFOUND, syscall);
  // The Answer section also holds the CNAME chain that led to the records:
  // keep only records of the type asked for, and drop an Answer left empty.
  const matching = json.Answer?.filter((a) => a.type === question.type);
  if (matching?.length) json.Answer = matching;
  else delete json.Answer;
  return json;
}

function requireAnswer(answer, name, syscall) {
  if (answer == null) throw new DnsError(name, NOTFOUND, syscall);
}

function dropFinalDot(s) {
  return s.endsWith(".") ? s.slice(0, -1) : s;
}

function mxRecord(name, { data }) {
  const [priority, exchange] = data.split(" ");
  if (priority == null || exchange == null) throw new DnsError(name, BADRESP, "queryMx");
  return { exchange: dropFinalDot(exchange), priority: parseInt(priority, 10) };
}

function soaRecord({ data }) {
  const [nsname, hostmaster, serial, refresh, retry, expire, minttl] = data.split(" ");
  validateString(nsname, "nsname");
  validateString(hostmaster, "hostmaster");
  validateString(serial, "serial");
  validateString(refresh, "refresh");
  validateString(retry, "retry");
  validateString(expire, "expire");
  validateString(minttl, "minttl");
  return {
    nsname,
    hostmaster,
    serial: parseInt(serial, 10),
    refresh: parseInt(refresh, 10),
    retry: parseInt(retry, 10),
    expire: parseInt(expire, 10),
    minttl: parseInt(minttl, 10),
  };
}

function srvRecord({ data }) {
  const [priority, weight, port, name] = data.split(" ");
  validateString(priority, "priority");
  validateString(weight, "weight");
  validateString(port, "port");
  validateString(name, "name");
  return {
    priority: parseInt(priority, 10),
    weight: parseInt(weight, 10),
    port: parseInt(port, 10),
    name,
  };
}

// A quoted chunk: a quote, then any run of non-quotes or of quotes that are
// not followed by another quote, then a quote.
const TXT_CHUNK = /"([^"]|"(?!"))*"/g;

function txtRecord({ data }) {
  if (!(data.startsWith('"') && data.endsWith('"'))) return [data];
  const chunks = data.match(TXT_CHUNK);
  if (chunks == null) return [];
  return chunks.map((s) => (s.startsWith('"') && s.endsWith('"') ? s.slice(1, -1) : s));
}

// --- CAA / NAPTR record data, as workerd's Rust DnsUtil parses it. ---------

const ASCII_WS = new Set([" ", "\t", "\n", "\f", "\r"]);

function splitAsciiWhitespace(s) {
  const out = [];
  let cur = "";
  for (const ch of s) {
    if (ASCII_WS.has(ch)) {
      if (cur) out.push(cur);
      cur = "";
    } else {
      cur += ch;
    }
  }
  if (cur) out.push(cur);
  return out;
}

function parserError(msg) {
  return new Error(msg);
}

// Rust's unsigned from_str_radix, with its error messages (thrown as
// RangeError, as workerd maps ParseIntError).
function parseUnsigned(s, radix, bits) {
  if (s.length === 0) throw new RangeError("cannot parse integer from empty string");
  let digits = s;
  if (s[0] === "+" || s[0] === "-") {
    digits = s.slice(1);
    if (digits.length === 0 || s[0] === "-") throw new RangeError("invalid digit found in string");
  }
  const max = (1n << BigInt(bits)) - 1n;
  let n = 0n;
  let overflow = false;
  for (const ch of digits) {
    const d = parseInt(ch, 36);
    if (!/^[0-9A-Za-z]$/.test(ch) || Number.isNaN(d) || d >= radix) {
      throw new RangeError("invalid digit found in string");
    }
    if (!overflow) {
      n = n * BigInt(radix) + BigInt(d);
      if (n > max) overflow = true;
    }
  }
  if (overflow) throw new RangeError("number too large to fit in target type");
  return Number(n);
}

function decodeHex(parts) {
  return parts.map((p) => {
    const n = parseUnsigned(p, 16, 16);
    if (n >= 0xd800 && n <= 0xdfff) throw parserError("Invalid UTF-16 sequence");
    return String.fromCharCode(n);
  });
}

function parseReplacement(parts) {
  if (parts.length === 0) return "";
  const labels = [];
  let lengthIndex = 0;
  let offset = 1;
  while (lengthIndex < parts.length) {
    const length = parseUnsigned(parts[lengthIndex], 16, 64);
    if (length + offset > parts.length) {
      throw parserError("replacement data too short for declared frame length");
    }
    const frame = parts.slice(offset, offset + length);
    const decoded = decodeHex(frame).join("");
    if (decoded !== "") labels.push(decoded);
    lengthIndex += frame.length + 1;
    offset = lengthIndex + 1;
  }
  return labels.join(".");
}

const unterminated = () => parserError("unterminated escape or quote in RDATA");

// Presentation-format RDATA fields: bare tokens or "quoted" strings, with
// \DDD (decimal octet) and \X escapes.
function splitRdataFields(input) {
  const chars = Array.from(input);
  let i = 0;
  const fields = [];
  const escape = () => {
    const three = chars.slice(i, i + 3);
    if (three.length === 3 && three.every((c) => c >= "0" && c <= "9")) {
      const octet = parseUnsigned(three.join(""), 10, 8);
      i += 3;
      return String.fromCharCode(octet);
    }
    if (i >= chars.length) throw unterminated();
    return chars[i++];
  };
  for (;;) {
    while (i < chars.length && ASCII_WS.has(chars[i])) i++;
    if (i >= chars.length) return fields;
    const quoted = chars[i] === '"';
    if (quoted) i++;
    let field = "";
    for (;;) {
      if (i >= chars.length) {
        if (quoted) throw unterminated();
        break;
      }
      const c = chars[i++];
      if (c === '"' && quoted) break;
      if (c === "\\") field += escape();
      else if (!quoted && ASCII_WS.has(c)) break;
      else field += c;
    }
    fields.push(field);
  }
}

function checkCaaTag(tag) {
  if (tag === "issuewild" || tag === "issue" || tag === "iodef") return;
  throw parserError(`Received unknown field '${tag}'`);
}

function parseCaa(record) {
  record = String(record);
  const parts = splitAsciiWhitespace(record);
  if (parts[0] !== "\\#") {
    const fields = splitRdataFields(record);
    if (fields.length !== 3) {
      throw parserError(`CAA record expected 3 fields, got ${fields.length}`);
    }
    const [critical, field, value] = fields;
    checkCaaTag(field);
    return { critical: parseUnsigned(critical, 10, 8), field, value };
  }
  if (parts.length < 3) throw parserError("CAA record too short: expected at least 3 fields");
  const data = parts.slice(2);
  if (data.length < 2) {
    throw parserError("CAA record data too short: expected critical and prefix length fields");
  }
  const critical = parseUnsigned(data[0], 16, 8);
  const prefixLength = parseUnsigned(data[1], 16, 64);
  if (data.length < 2 + prefixLength) {
    throw parserError(`CAA record data too short for prefix_length ${prefixLength}`);
  }
  const field = decodeHex(data.slice(2, prefixLength + 2)).join("");
  const value = decodeHex(data.slice(prefixLength + 2)).join("");
  checkCaaTag(field);
  return { critical, field, value };
}

function parseNaptr(record) {
  record = String(record);
  const parts = splitAsciiWhitespace(record);
  if (parts[0] !== "\\#") {
    const fields = splitRdataFields(record);
    if (fields.length !== 6) {
      throw parserError(`NAPTR record expected 6 fields, got ${fields.length}`);
    }
    const [order, preference, flags, service, regexp, replacement] = fields;
    const out = {
      flags,
      service,
      regexp,
      // Names without the final dot; the root name is "".
      replacement: dropFinalDot(replacement),
      order: 0,
      preference: 0,
    };
    out.order = parseUnsigned(order, 10, 32);
    out.preference = parseUnsigned(preference, 10, 32);
    return out;
  }
  if (parts.length < 2) throw parserError("NAPTR record too short");
  const data = parts.slice(1);
  if (data.length < 6) throw parserError("NAPTR record data too short: expected at least 6 fields");
  const order = parseUnsigned(data.slice(1, 3).join(""), 16, 32);
  const preference = parseUnsigned(data.slice(3, 5).join(""), 16, 32);

  const flagLength = parseUnsigned(data[5], 16, 64);
  const flagOffset = 6;
  if (data.length < flagOffset + flagLength + 1) {
    throw parserError("NAPTR record too short for flags field");
  }
  const flags = decodeHex(data.slice(flagOffset, flagOffset + flagLength)).join("");

  const serviceLength = parseUnsigned(data[flagOffset + flagLength], 16, 64);
  const serviceOffset = flagOffset + flagLength + 1;
  if (data.length < serviceOffset + serviceLength + 1) {
    throw parserError("NAPTR record too short for service field");
  }
  const service = decodeHex(data.slice(serviceOffset, serviceOffset + serviceLength)).join("");

  const regexpLength = parseUnsigned(data[serviceOffset + serviceLength], 16, 64);
  const regexpOffset = serviceOffset + serviceLength + 1;
  if (data.length < regexpOffset + regexpLength) {
    throw parserError("NAPTR record too short for regexp field");
  }
  const regexp = decodeHex(data.slice(regexpOffset, regexpOffset + regexpLength)).join("");
  const replacement = parseReplacement(data.slice(regexpOffset + regexpLength));
  return { flags, service, regexp, replacement, order, preference };
}

function caaRecord({ data }) {
  const rec = parseCaa(data);
  const out = { critical: rec.critical };
  out[rec.field] = rec.value;
  return out;
}

function naptrRecord({ data }) {
  return parseNaptr(data);
}

