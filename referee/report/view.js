// referee view: draws the rollouts of #view-data a page at a time. Every string in the data
// is the policy's or the dataset's text: it reaches the page only through textContent (and
// dataset/className of our own values), never as markup.
"use strict";
(function () {
  const PAGE = 50; // rollouts drawn at a time
  const CAP = 4000; // characters of a text shown before its "show all" button
  const data = JSON.parse(document.getElementById("view-data").textContent);
  const rows = data.rollouts;
  const byId = (id) => document.getElementById(id);
  const state = { failure: "*", component: "", cond: "any", threshold: data.threshold,
                  order: "asc", query: "", page: 0, view: rows };

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  const isNum = (v) => typeof v === "number" && isFinite(v);
  const fmt = (v) => (isNum(v) ? String(Number(v.toPrecision(4))) : v == null ? "–" : String(v));
  const json = (v) => (typeof v === "string" ? v : JSON.stringify(v, null, 2));
  const has = (o, k) => o != null && Object.prototype.hasOwnProperty.call(o, k);

  function valueOf(r) {
    return state.component ? (r.components || {})[state.component] : r.reward;
  }

  function text(r) { // what the search box looks in, lower-cased once
    if (r._text === undefined) {
      const parts = [r.id, r.group, r.reason, r.failure && r.failure.message, r.unreadable];
      if (has(r, "completion")) parts.push(json(r.completion));
      r._text = parts.filter((p) => p != null).join("\n").toLowerCase();
    }
    return r._text;
  }

  function matches(r) {
    const type = r.failure ? r.failure.type : "";
    if (state.failure !== "*" && type !== state.failure) return false;
    if (state.component && state.cond !== "any") {
      const v = (r.components || {})[state.component];
      if (state.cond === "none") { if (isNum(v)) return false; }
      else if (!isNum(v) || !isNum(state.threshold)) return false;
      else if (state.cond === "below" && !(v < state.threshold)) return false;
      else if (state.cond === "atleast" && !(v >= state.threshold)) return false;
    }
    return !state.query || text(r).includes(state.query);
  }

  function compare(a, b) { // no value ranks lowest: first when ascending, last descending
    if (state.order === "file") return a.i - b.i;
    const sign = state.order === "desc" ? -1 : 1;
    const x = valueOf(a), y = valueOf(b);
    if (!isNum(x) || !isNum(y)) {
      if (isNum(x) === isNum(y)) return a.i - b.i;
      return isNum(x) ? sign : -sign;
    }
    return (x - y) * sign || a.i - b.i;
  }

  function textBlock(s) {
    const pre = el("pre", "text");
    s = String(s);
    if (s.length <= CAP) { pre.textContent = s; return pre; }
    pre.textContent = s.slice(0, CAP) + " …";
    const box = el("div");
    const more = el("button", "more", "show all (" + s.length.toLocaleString() + " characters)");
    more.type = "button";
    more.addEventListener("click", () => { pre.textContent = s; more.remove(); });
    box.append(pre, more);
    return box;
  }

  function content(c) {
    if (c == null || c === "") return [];
    if (!Array.isArray(c)) return [textBlock(c)];
    return c.map((part) => textBlock(
      part && (part.type === undefined || part.type === "text") && typeof part.text === "string"
        ? part.text : json(part)));
  }

  function call(c) {
    const box = el("div", "call");
    const head = el("div");
    head.append("call ", el("b", "", c.name), c.id ? " (" + c.id + ")" : "");
    let args = c.arguments;
    if (typeof args === "string") {
      try { args = JSON.parse(args); } catch (e) { head.append(" — arguments are not JSON"); }
    }
    box.append(head, textBlock(json(args)));
    return box;
  }

  const KNOWN = ["role", "content", "tool_calls", "tool_call_id", "name"];

  function messages(value) {
    if (!Array.isArray(value)) return textBlock(value);
    const box = el("div");
    value.forEach((m, k) => {
      const role = ["system", "developer", "user", "assistant", "tool"].includes(m.role)
        ? m.role : "other";
      const item = el("div", "msg role-" + role);
      let head = "[" + k + "] " + m.role;
      if (m.name) head += " " + m.name;
      if (m.tool_call_id) head += ", answering " + m.tool_call_id;
      item.append(el("div", "role", head), ...content(m.content));
      (m.tool_calls || []).forEach((c) => item.append(call(c)));
      const extra = {};
      Object.keys(m).forEach((key) => { if (!KNOWN.includes(key)) extra[key] = m[key]; });
      if (Object.keys(extra).length) item.append(textBlock(json(extra)));
      box.append(item);
    });
    return box;
  }

  function section(parent, title, ...nodes) {
    parent.append(el("h3", "", title), ...nodes);
  }

  function components(r) {
    const table = el("table");
    const names = Object.keys(r.components || {});
    names.forEach((name) => {
      const tr = el("tr");
      tr.append(el("td", "", name), el("td", "n", fmt(r.components[name])));
      table.append(tr);
    });
    (r.skipped || []).forEach((name) => {
      if (names.includes(name)) return;
      const tr = el("tr");
      tr.append(el("td", "", name), el("td", "n muted", "skipped"));
      table.append(tr);
    });
    return table;
  }

  function body(r) {
    const box = el("div", "body");
    const facts = ["line " + fmt(r.line)];
    if (r.group != null) facts.push("group " + r.group);
    if (has(r, "cost")) facts.push("cost $" + fmt(r.cost));
    if (has(r, "latency")) facts.push("latency " + fmt(r.latency) + " s");
    if (has(r, "tokens")) facts.push(fmt(r.tokens) + " tokens");
    box.append(el("p", "facts", facts.join(" · ")));
    if (r.unreadable) section(box, "Unreadable row", textBlock(r.unreadable));
    if (r.failure) {
      const f = r.failure;
      section(box, "Failure: " + f.type + (f.where ? " in " + f.where : ""),
              textBlock(f.message || "(no message)"));
    }
    section(box, "Reason", textBlock(r.reason == null ? "(none)" : r.reason));
    if (r.components || r.skipped) section(box, "Components", components(r));
    if (r.steps) section(box, "Per-step rewards", textBlock(r.steps.map(fmt).join(", ")));
    if (has(r, "prompt")) section(box, "Prompt", messages(r.prompt));
    if (has(r, "completion")) section(box, "Completion", messages(r.completion));
    if (has(r, "reference")) section(box, "Reference", textBlock(json(r.reference)));
    if (has(r, "metadata")) section(box, "Metadata", textBlock(json(r.metadata)));
    if (!data.has_rollouts) {
      box.append(el("p", "muted", "No prompt or completion: pass --rollouts to referee view."));
    }
    return box;
  }

  function card(r, rank) {
    const d = el("details", "ro");
    const value = valueOf(r);
    d.dataset.id = r.id == null ? "" : r.id;
    d.dataset.failure = r.failure ? r.failure.type : "";
    d.dataset.value = isNum(value) ? String(value) : "";
    const s = el("summary");
    const level = !isNum(value) ? "none" : value < data.threshold ? "lo" : "hi";
    s.append(el("span", "rank", "#" + rank), el("span", "reward " + level, fmt(value)));
    if (state.component) s.append(el("span", "muted", "total " + fmt(r.reward)));
    s.append(el("span", "rid", r.id == null ? "line " + r.line : r.id));
    if (r.failure) s.append(el("span", "badge fail", r.failure.type));
    if (r.unreadable) s.append(el("span", "badge fail", "unreadable"));
    const why = r.reason || (r.failure && r.failure.message) || r.unreadable || "";
    s.append(el("span", "why", why.slice(0, 300).split("\n")[0]));
    d.append(s);
    d.addEventListener("toggle", () => {
      if (d.open && !d.dataset.drawn) { d.dataset.drawn = "1"; d.append(body(r)); }
    });
    return d;
  }

  function draw() {
    const list = byId("rows");
    const view = state.view;
    const pages = Math.max(1, Math.ceil(view.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const start = state.page * PAGE;
    list.replaceChildren(...view.slice(start, start + PAGE).map((r, k) => card(r, start + k + 1)));
    byId("count").textContent = view.length + " of " + rows.length + " rollouts"
      + (data.shown < data.rows ? " (of " + data.rows + " in the file)" : "");
    byId("page").textContent = "page " + (state.page + 1) + " of " + pages;
    byId("prev").disabled = state.page === 0;
    byId("next").disabled = state.page >= pages - 1;
  }

  function refresh() {
    state.view = rows.filter(matches).sort(compare);
    state.page = 0;
    draw();
  }

  byId("failures").addEventListener("click", (event) => {
    const chip = event.target.closest("button.chip");
    if (!chip) return;
    state.failure = chip.dataset.failure;
    document.querySelectorAll("button.chip").forEach((c) => c.classList.toggle("on", c === chip));
    refresh();
  });
  byId("order").addEventListener("change", (e) => { state.order = e.target.value; refresh(); });
  byId("component").addEventListener("change", (e) => {
    state.component = e.target.value; refresh();
  });
  byId("cond").addEventListener("change", (e) => { state.cond = e.target.value; refresh(); });
  byId("threshold").addEventListener("input", (e) => {
    state.threshold = e.target.value === "" ? NaN : Number(e.target.value); refresh();
  });
  let typing = 0;
  byId("query").addEventListener("input", (e) => {
    clearTimeout(typing);
    typing = setTimeout(() => { state.query = e.target.value.toLowerCase(); refresh(); }, 200);
  });
  byId("prev").addEventListener("click", () => { state.page -= 1; draw(); scrollTo(0, 0); });
  byId("next").addEventListener("click", () => { state.page += 1; draw(); scrollTo(0, 0); });
  byId("openall").addEventListener("click", () => {
    document.querySelectorAll("details.ro").forEach((d) => { d.open = true; });
  });
  document.addEventListener("keydown", (e) => { // j/k: open the next/previous rollout
    if (e.target.closest && e.target.closest("input, select, textarea")) return;
    if (e.key !== "j" && e.key !== "k") return;
    const cards = Array.from(document.querySelectorAll("details.ro"));
    const at = cards.findIndex((d) => d.open);
    const next = cards[at < 0 ? 0 : Math.max(0, Math.min(cards.length - 1,
                                                         at + (e.key === "j" ? 1 : -1)))];
    if (!next) return;
    cards.forEach((d) => { if (d !== next) d.open = false; });
    next.open = true;
    next.scrollIntoView({ block: "start" });
  });
  refresh();
})();
