// fs.glob's pattern walk, as workerd's internal_fs_glob: patterns are matched
// segment by segment against the directory listings under cwd (so an
// absolute pattern matches nothing), with braces, extglobs and **.

const DIRENT_DIR = 2;
const MAX_WALK_DEPTH = 256;

function splitTopLevel(str, sep) {
  const parts = [];
  let depth = 0;
  let current = "";
  for (let i = 0; i < str.length; i++) {
    const c = str.charAt(i);
    if (c === "\\" && i + 1 < str.length) {
      current += c + str.charAt(i + 1);
      i++;
    } else if (c === "{" || c === "(") {
      depth++;
      current += c;
    } else if (c === "}" || c === ")") {
      depth--;
      current += c;
    } else if (c === sep && depth === 0) {
      parts.push(current);
      current = "";
    } else {
      current += c;
    }
  }
  parts.push(current);
  return parts;
}

export function expandBraces(pattern) {
  let depth = 0;
  let start = -1;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\" && i + 1 < pattern.length) {
      i++;
      continue;
    }
    if (c === "{") {
      if (depth === 0) start = i;
      depth++;
    } else if (c === "}") {
      depth--;
      if (depth === 0 && start !== -1) {
        const prefix = pattern.slice(0, start);
        const alternatives = splitTopLevel(pattern.slice(start + 1, i), ",");
        const suffix = pattern.slice(i + 1);
        if (alternatives.length === 1) return [pattern];
        const out = [];
        for (const alt of alternatives) out.push(...expandBraces(prefix + alt + suffix));
        return out;
      }
    }
  }
  return [pattern];
}

function findMatchingParen(str, open) {
  let depth = 0;
  for (let i = open; i < str.length; i++) {
    if (str[i] === "\\" && i + 1 < str.length) {
      i++;
      continue;
    }
    if (str[i] === "(") depth++;
    else if (str[i] === ")") {
      depth--;
      if (depth === 0) return i;
    }
  }
  return -1;
}

const escapeRegexChar = (c) => (".+*?^$|()[]{}\\".includes(c) ? "\\" + c : c);

function segmentToRegexStr(segment) {
  let regex = "";
  let inClass = false;
  for (let i = 0; i < segment.length; ) {
    const c = segment[i] ?? "";
    if (c === "\\" && i + 1 < segment.length) {
      regex += "\\" + escapeRegexChar(segment[i + 1] ?? "");
      i += 2;
      continue;
    }
    if (inClass) {
      if (c === "]") inClass = false;
      regex += c;
      i++;
      continue;
    }
    if ("@*+?!".includes(c) && i + 1 < segment.length && segment[i + 1] === "(") {
      const close = findMatchingParen(segment, i + 1);
      if (close !== -1) {
        const group = splitTopLevel(segment.slice(i + 2, close), "|").map(segmentToRegexStr).join("|");
        if (c === "@") regex += "(?:" + group + ")";
        else if (c === "*") regex += "(?:" + group + ")*";
        else if (c === "+") regex += "(?:" + group + ")+";
        else if (c === "?") regex += "(?:" + group + ")?";
        else regex += "(?!(?:" + group + ")$)[^/]*";
        i = close + 1;
        continue;
      }
    }
    switch (c) {
      case "[":
        inClass = true;
        regex += "[";
        if (i + 1 < segment.length && segment[i + 1] === "!") {
          regex += "^";
          i++;
        }
        break;
      case "*":
        regex += "[^/]*";
        break;
      case "?":
        regex += "[^/]";
        break;
      case ".":
      case "+":
      case "^":
      case "$":
      case "|":
      case "(":
      case ")":
      case "{":
      case "}":
        regex += "\\" + c;
        break;
      default:
        regex += c;
    }
    i++;
  }
  return regex;
}

const segmentToRegex = (segment) => new RegExp("^" + segmentToRegexStr(segment) + "$");

function normalizePattern(pattern) {
  if (pattern.startsWith("./")) pattern = pattern.slice(2);
  pattern = pattern.replace(/\/\/+/g, "/");
  if (pattern.endsWith("/") && pattern.length > 1) pattern = pattern.slice(0, -1);
  return pattern;
}

function globToRegex(pattern) {
  const parts = [];
  for (const seg of normalizePattern(pattern).split("/").filter((s) => s !== "")) {
    if (seg === "**") parts.push("**");
    else if (seg === ".") continue;
    else if (seg === "..") parts.pop();
    else parts.push(segmentToRegexStr(seg));
  }
  let regex = "";
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] ?? "";
    const prev = i > 0 ? (parts[i - 1] ?? "") : "";
    if (part === "**") {
      if (parts.length === 1) regex = ".*";
      else if (i === 0) regex += "(?:.*\\/)?";
      else if (i === parts.length - 1) regex += "(?:\\/.*)?";
      else regex += "(?:\\/[^/]+)*(?:\\/)?";
    } else {
      if (i > 0 && prev !== "**") regex += "\\/";
      regex += part;
    }
  }
  return new RegExp("^" + regex + "$");
}

function compileExcludePatterns(exclude) {
  const regexes = [];
  for (const pat of exclude) for (const expanded of expandBraces(pat)) regexes.push(globToRegex(expanded));
  return (path) => regexes.some((re) => re.test(path));
}

function collapseGlobstars(segments) {
  const out = [];
  for (const seg of segments) {
    if (seg === "**" && out[out.length - 1] === "**") continue;
    out.push(seg);
  }
  return out;
}

// Returns Map(relativePath -> { relativePath, handle }) in match order, with
// exclude patterns (an array) applied.
export function globWalk(cffs, normalizePath, patterns, cwd, exclude) {
  const excludeFn = Array.isArray(exclude) ? compileExcludePatterns(exclude) : undefined;
  const results = new Map();
  const cache = new Map();

  function entriesOf(absPath) {
    const cached = cache.get(absPath);
    if (cached !== undefined) return cached;
    let entries;
    try {
      entries = cffs.readdir(normalizePath(absPath), { recursive: false });
    } catch {
      entries = [];
    }
    cache.set(absPath, entries);
    return entries;
  }

  function walk(segments, idx, abs, rel, regexes, visited, depth) {
    if (depth >= MAX_WALK_DEPTH) return;
    if (idx >= segments.length) {
      if (!results.has(rel)) {
        const slash = abs.lastIndexOf("/");
        const parent = slash > 0 ? abs.slice(0, slash) : abs;
        const base = rel.split("/").pop() ?? "";
        const handle = entriesOf(parent).find((e) => e.name === base) ?? null;
        results.set(rel, { relativePath: rel, handle });
      }
      return;
    }
    const seg = segments[idx] ?? "";
    if (seg === ".") return walk(segments, idx + 1, abs, rel, regexes, visited, depth);
    if (seg === "..") {
      if (abs === cwd || !abs.startsWith(cwd + "/")) return;
      const slash = abs.lastIndexOf("/");
      const parts = rel.split("/").filter(Boolean);
      parts.pop();
      return walk(segments, idx + 1, slash > 0 ? abs.slice(0, slash) : "/", parts.join("/"), regexes, visited, depth);
    }
    if (seg === "**") {
      const key = `${abs}:${String(idx)}`;
      visited ??= new Set();
      if (visited.has(key)) return;
      visited.add(key);
      walk(segments, idx + 1, abs, rel, regexes, visited, depth);
      for (const entry of entriesOf(abs)) {
        const childAbs = abs + "/" + entry.name;
        const childRel = rel ? rel + "/" + entry.name : entry.name;
        walk(segments, idx + 1, childAbs, childRel, regexes, visited, depth + 1);
        if (entry.type === DIRENT_DIR) walk(segments, idx, childAbs, childRel, regexes, visited, depth + 1);
      }
      return;
    }
    const re = regexes[idx] ?? segmentToRegex(seg);
    for (const entry of entriesOf(abs)) {
      if (!re.test(entry.name)) continue;
      const childAbs = abs + "/" + entry.name;
      const childRel = rel ? rel + "/" + entry.name : entry.name;
      if (idx + 1 >= segments.length) {
        if (!results.has(childRel)) results.set(childRel, { relativePath: childRel, handle: entry });
      } else {
        walk(segments, idx + 1, childAbs, childRel, regexes, visited, depth + 1);
      }
    }
  }

  for (const p of patterns) {
    for (const expanded of expandBraces(p)) {
      const segments = collapseGlobstars(normalizePattern(expanded).split("/").filter((s) => s !== ""));
      if (segments.length === 0) continue;
      const regexes = segments.map((s) => (s === "**" || s === "." || s === ".." ? null : segmentToRegex(s)));
      walk(segments, 0, cwd, "", regexes, undefined, 0);
    }
  }
  if (excludeFn) for (const k of [...results.keys()]) if (excludeFn(k)) results.delete(k);
  return results;
}
