// Switchboard chat widget: <script src="…/widget.js" data-guide="…"></script>
//
// Defines <switchboard-chat> (open Shadow DOM, so the page's CSS cannot
// reach in) and adds one to the page. It speaks protocol v1 over /ws
// (docs/websocket.md). Everything the server sends is set as text, except
// the `html` of a Markdown message and the `text_html` of a card, which the
// gateway renders and sanitises (goldmark + bluemonday): no Markdown or HTML
// from the model is ever interpreted here.
(() => {
  "use strict";
  if (customElements.get("switchboard-chat")) return;

  // STRINGS are every text the widget shows by itself (not the model's,
  // not the gateway's notices): labels, buttons, states, notices. A page
  // translates them with the `strings` attribute (JSON; `data-strings` on
  // the script tag) or the `strings` property (an object); keys it leaves
  // out keep these. {name} is filled in by the widget.
  const STRINGS = Object.freeze({
    title: "Chat",
    openChat: "Open chat: {title}",
    closeChat: "Close chat",
    conversation: "Conversation",
    messageLabel: "Message",
    placeholder: "Type a message…",
    placeholderViewer: "You can watch this conversation but not write.",
    send: "Send",
    sending: "sending…",
    notSent: "not sent",
    connecting: "connecting…",
    reconnecting: "reconnecting…",
    queued: "not connected: your message will be sent when the connection is back",
    notConnected: "Not connected; try again in a moment.",
    cannotConnect: "Cannot connect to {server}: {error}",
    disconnected: "Disconnected: {reason}. Reload the page to try again.",
    notAllowed: "not allowed",
    originRefused: "This site is not allowed to use this chat",
    thinking: "thinking…",
    runningTool: "running {tool}…",
    aTool: "a tool",
    awaitingApproval: "waiting for approval…",
    interrupted: "interrupted",
    error: "error",
    toolFailed: "failed",
    toolDone: "done",
    toolError: "error: {text}",
    plan: "Plan",
    planProgress: "Plan · {done}/{total} done",
    planPending: "to do",
    planInProgress: "in progress",
    planDone: "done",
    planFailed: "failed",
    approvalFor: "Approval for {tool}",
    allowTool: "Allow {tool}?",
    approve: "Approve",
    deny: "Deny",
    alwaysAllow: "Always allow",
    alwaysAllowTitle: "Run {tool} without asking for the rest of this conversation",
    waitingForApprover: "Waiting for an approver…",
    approvedBy: "Approved by {by}",
    deniedBy: "Denied by {by}",
    forThisSession: "for this session",
    expired: "Expired: not run",
    cancelled: "Cancelled",
    cancelledBy: "Cancelled by {by}",
    someone: "someone",
    you: "{name} (you)",
    hereNow: "here now",
    lastSeen: "last seen {ago} ago",
    notSeenYet: "not seen yet",
    agoMoments: "moments",
    agoMinutes: "{n}m",
    agoHours: "{n}h",
    agoDays: "{n}d",
    people: "People in this conversation",
    andOthers: "and {names}",
    share: "Share",
    shareTitle: "Invite others: copy a link to this conversation",
    inviteLink: "Invite link",
    hideInviteLink: "Hide the invite link",
    copyingLink: "Copying the link…",
    linkCopied: "Link copied",
    copyLink: "Copy this link",
    left: "You left this conversation.",
    compacted: "Earlier messages were summarised for the assistant; they are all still here.",
    passedTo: "Passed to {to}.",
    passedToWhy: "Passed to {to}: {reason}",
    inviteUnusable: "This invite link cannot be used: {reason}.",
    inviteUnusableShort: "This invite link cannot be used.",
    suggestions: "Suggestions",
    card: "Card",
    choose: "Choose",
    choosePlaceholder: "Choose…",
    submit: "Submit",
    channelWeb: "Web",
    channelStdin: "Terminal",
    channelSlack: "Slack",
    channelDiscord: "Discord",
    roleOwner: "owner",
    roleApprover: "approver",
    roleMember: "member",
    roleViewer: "viewer",
    attach: "Attach files",
    filesToSend: "Files to send with your next message",
    removeFile: "Remove {name}",
    sharedFiles: "Files",
    dropFiles: "Drop files to send them with your next message",
    fileEmpty: "{name} is empty, so it was not attached.",
    fileNotSaved: "not saved",
    fileProgress: "Sending {name}",
    fileUnreadable: "{name} could not be read: {error}",
    bytes: "{n} B",
    kib: "{n} KiB",
    mib: "{n} MiB",
  });

  // fill puts vars into a string's {name} places.
  function fill(s, vars) {
    return vars ? s.replace(/\{(\w+)\}/g, (m, k) => (k in vars ? String(vars[k]) : m)) : s;
  }

  // cap is "slack" → "Slack", for the channel and role keys.
  function cap(s) { return s ? s[0].toUpperCase() + s.slice(1) : ""; }

  // REFUSAL_TRIES is how many connections in a row must close without
  // ever opening before the widget asks whether the gateway is up at all
  // (probe, below).
  const REFUSAL_TRIES = 3;

  // CHUNK is how much of a file one file_chunk frame carries: its base64
  // (43,692 characters) keeps the frame well under the gateway's 64 KiB.
  // While more than QUEUED bytes wait in the socket's buffer, the next
  // chunk waits: the gateway reads a chunk only once the one before is on
  // its way to its disk, so this is how fast it takes them.
  const CHUNK = 32768;
  const QUEUED = 1 << 20;

  const script = document.currentScript;
  // The gateway that served this script is the default server.
  const scriptBase = script && script.src ? new URL(script.src, location.href) : new URL(location.href);
  const defaultServer = new URL("/ws", scriptBase);
  defaultServer.protocol = scriptBase.protocol === "https:" ? "wss:" : "ws:";

  // DARK is the dark theme: the colours of :host below for a dark screen,
  // each at least 4.5:1 against what it is drawn on (browser_test.go
  // checks every control in both themes).
  const DARK = `
  --sb-accent: #4162e0; --sb-accent-fg: #fff; --sb-bg: #171c26; --sb-fg: #e6e9ef;
  --sb-muted: #9aa3b2; --sb-border: #3a4252; --sb-bubble: #232a36; --sb-danger: #ff9470;
  --sb-link: #a3b3ff; --sb-code-bg: rgba(255,255,255,.08); color-scheme: dark;`;

  const STYLE = `
:host {
  --sb-accent: #3454d1; --sb-accent-fg: #fff; --sb-bg: #fff; --sb-fg: #1d2330;
  --sb-muted: #667085; --sb-border: #d0d5dd; --sb-bubble: #f2f4f7; --sb-danger: #c4320a;
  --sb-link: var(--sb-accent); --sb-code-bg: rgba(0,0,0,.06);
  --sb-font: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  --sb-radius: 12px; --sb-width: 380px; --sb-height: 560px; --sb-z: 2147483000;
  all: initial; color-scheme: light; font-family: var(--sb-font); color: var(--sb-fg);
}
@media (prefers-color-scheme: dark) { :host(:not([theme="light"])) {${DARK} } }
:host([theme="dark"]) {${DARK} }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
button, select, input, textarea { font: inherit; color: inherit; }
:focus-visible { outline: 2px solid var(--sb-link); outline-offset: 2px; }
.launcher {
  position: fixed; right: 20px; bottom: 20px; z-index: var(--sb-z);
  width: 56px; height: 56px; border-radius: 50%; border: 0; cursor: pointer;
  background: var(--sb-accent); color: var(--sb-accent-fg); font-size: 26px; line-height: 1;
  display: flex; align-items: center; justify-content: center; padding: 0;
  box-shadow: 0 4px 14px rgba(0,0,0,.25);
}
.icon { width: 1em; height: 1em; vertical-align: -0.15em; flex: none; }
.panel {
  position: fixed; right: 20px; bottom: 88px; z-index: var(--sb-z);
  width: var(--sb-width); height: var(--sb-height); max-height: calc(100vh - 108px);
  display: flex; flex-direction: column; background: var(--sb-bg); color: var(--sb-fg);
  border: 1px solid var(--sb-border); border-radius: var(--sb-radius);
  box-shadow: 0 12px 32px rgba(0,0,0,.2); overflow: hidden; font-size: 15px; line-height: 1.45;
}
header { display: flex; align-items: center; gap: 8px; padding: 10px 12px; border-bottom: 1px solid var(--sb-border); }
header h2 { flex: 1; min-width: 0; margin: 0; font-size: 16px; font-weight: 600; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.people { display: flex; margin: 0; padding: 0; list-style: none; }
.people li { position: relative; margin-left: -4px; }
.people .avatar {
  display: flex; align-items: center; justify-content: center; width: 26px; height: 26px; border-radius: 50%;
  background: var(--sb-bubble); border: 2px solid var(--sb-bg); box-shadow: 0 0 0 1px var(--sb-border);
  font-size: 11px; font-weight: 600; color: var(--sb-fg);
}
.people .here { position: absolute; right: -1px; bottom: -1px; width: 9px; height: 9px; border-radius: 50%; background: #12b76a; border: 2px solid var(--sb-bg); }
.share { border: 1px solid var(--sb-link); color: var(--sb-link); background: var(--sb-bg); border-radius: 999px; padding: 2px 10px; font-size: 13px; cursor: pointer; }
.share-link { display: flex; flex-wrap: wrap; align-items: center; gap: 6px; padding: 8px 12px; border-bottom: 1px solid var(--sb-border); font-size: 13px; }
.share-link .share-status { flex: 1; margin: 0; color: var(--sb-muted); }
.share-link input { flex: 1 1 100%; min-width: 0; padding: 5px 7px; border: 1px solid var(--sb-border); border-radius: 6px; background: var(--sb-bg); font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
.share-link .hide { border: 0; background: none; font-size: 18px; line-height: 1; cursor: pointer; color: var(--sb-muted); padding: 0 4px; }
.dot { width: 8px; height: 8px; border-radius: 50%; background: var(--sb-muted); }
:host([data-connected="true"]) .dot { background: #12b76a; }
.close { border: 0; background: none; font-size: 22px; cursor: pointer; color: var(--sb-muted); padding: 0 4px; }
.log { flex: 1; overflow-y: auto; padding: 12px; display: flex; flex-direction: column; gap: 8px; }
.msg { max-width: 88%; padding: 8px 11px; border-radius: var(--sb-radius); background: var(--sb-bubble); overflow-wrap: anywhere; }
.msg[data-role="user"] { align-self: flex-start; }
.msg[data-role="user"][data-mine="true"] { align-self: flex-end; background: var(--sb-accent); color: var(--sb-accent-fg); }
.msg[data-role="user"][data-mine="true"] .author { display: none; }
.msg[data-role="user"][data-mine="true"][data-pending] { background: none; color: var(--sb-muted); border: 1px dashed var(--sb-border); }
.msg[data-role="user"][data-mine="true"][data-pending="failed"] { border-color: var(--sb-danger); }
.msg .sending { display: block; font-size: 12px; text-align: right; }
.msg[data-pending="failed"] .sending { color: var(--sb-danger); }
.msg[data-role="system"] { align-self: center; background: none; color: var(--sb-muted); font-size: 13px; }
.msg .author, .msg .model, .msg .cut { display: block; font-size: 12px; color: var(--sb-muted); }
.msg .body { white-space: normal; }
.msg[data-role="user"] .body, .msg.streaming .body { white-space: pre-wrap; }
.msg[data-role="system"] .body { white-space: pre-wrap; text-align: left; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
.msg .body > :first-child { margin-top: 0; } .msg .body > :last-child { margin-bottom: 0; }
.msg pre { overflow-x: auto; background: var(--sb-code-bg); padding: 8px; border-radius: 6px; }
.msg code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 13px; }
.msg table { border-collapse: collapse; } .msg td, .msg th { border: 1px solid var(--sb-border); padding: 2px 6px; }
.msg img { max-width: 100%; }
.tool { font-size: 13px; color: var(--sb-muted); border-left: 3px solid var(--sb-border); padding-left: 8px; }
.tool summary { cursor: pointer; }
.tool pre, .confirm pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 4px 0; font-size: 12px; }
.tool.error { border-left-color: var(--sb-danger); }
.plan { border: 1px solid var(--sb-border); border-radius: var(--sb-radius); padding: 8px 10px; font-size: 14px; }
.plan .title { font-weight: 600; margin: 0 0 4px; }
.plan ol, .plan ul { margin: 0; padding-left: 0; list-style: none; }
.plan li { display: flex; gap: 6px; align-items: baseline; overflow-wrap: anywhere; }
.plan ul.tasks li { padding-left: 22px; font-size: 13px; color: var(--sb-muted); }
.plan .mark { flex: none; width: 16px; text-align: center; }
.plan [data-status="done"] .mark { color: var(--sb-link); }
.plan [data-status="failed"] .mark, .plan [data-status="failed"] { color: var(--sb-danger); }
.plan [data-status="in_progress"] { font-weight: 600; }
.welcome { display: flex; flex-direction: column; gap: 8px; }
.welcome .greeting { align-self: flex-start; max-width: 88%; margin: 0; padding: 8px 11px; border-radius: var(--sb-radius); background: var(--sb-bubble); white-space: pre-wrap; overflow-wrap: anywhere; }
.suggestions { display: flex; flex-wrap: wrap; gap: 6px; }
.suggestions button {
  border: 1px solid var(--sb-link); color: var(--sb-link); background: var(--sb-bg); border-radius: 999px;
  padding: 4px 12px; cursor: pointer; font-size: 14px; text-align: left; overflow-wrap: anywhere;
}
.confirm, .card { border: 1px solid var(--sb-border); border-radius: var(--sb-radius); padding: 10px; }
.confirm .warning { color: var(--sb-danger); }
.actions { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 6px; }
/* The plain look of a card's or an approval's buttons, in :where() so it
   weighs no more than one element: button.primary and the like below
   always win (a .card form button rule once made Submit white on white). */
:where(.actions, .card form) button, .send {
  border: 1px solid var(--sb-border); background: var(--sb-bg); color: var(--sb-fg); border-radius: 8px; padding: 6px 12px; cursor: pointer;
}
button.primary, .send, button[data-approve] { background: var(--sb-accent); color: var(--sb-accent-fg); border-color: var(--sb-accent); }
button.danger, button[data-deny] { color: var(--sb-danger); border-color: var(--sb-danger); }
button:disabled, select:disabled, input:disabled, textarea:disabled { opacity: .55; cursor: default; }
button.chosen { outline: 2px solid var(--sb-fg); opacity: 1; }
.resolution { font-size: 13px; color: var(--sb-muted); margin: 6px 0 0; }
.card h3 { margin: 0 0 6px; font-size: 15px; }
.card dl { display: grid; grid-template-columns: auto 1fr; gap: 2px 10px; margin: 6px 0; font-size: 14px; }
.card dt { color: var(--sb-muted); } .card dd { margin: 0; }
.card img { max-width: 100%; border-radius: 8px; margin: 6px 0; }
.card select, .card input, .card textarea { width: 100%; padding: 6px; border: 1px solid var(--sb-border); border-radius: 6px; margin: 2px 0 6px; background: var(--sb-bg); }
.card label { display: block; font-size: 13px; }
.notice { font-size: 13px; color: var(--sb-danger); align-self: center; text-align: center; }
.compaction, .handoff { font-size: 12px; color: var(--sb-muted); align-self: center; text-align: center; }
.state { min-height: 20px; padding: 0 12px; font-size: 13px; color: var(--sb-muted); }
form.compose { display: flex; gap: 8px; padding: 10px 12px; border-top: 1px solid var(--sb-border); }
form.compose textarea { flex: 1; resize: none; height: 42px; max-height: 120px; padding: 9px; border: 1px solid var(--sb-border); border-radius: 8px; background: var(--sb-bg); }
.attach { display: flex; align-items: center; justify-content: center; flex: none; width: 42px; padding: 0; border: 1px solid var(--sb-border); border-radius: 8px; background: var(--sb-bg); color: var(--sb-fg); font-size: 20px; cursor: pointer; }
.tray, .files { display: flex; flex-wrap: wrap; gap: 6px; margin: 0; padding: 0; list-style: none; }
.tray { padding: 8px 12px 0; }
.files { margin-top: 6px; }
.file { display: flex; align-items: center; gap: 6px; max-width: 100%; min-width: 0; padding: 4px 8px; border: 1px solid var(--sb-border); border-radius: 8px; background: var(--sb-bg); color: var(--sb-fg); font-size: 13px; }
.file img { width: 40px; height: 40px; object-fit: cover; border-radius: 4px; flex: none; }
.file .icon { flex: none; color: var(--sb-muted); }
.file .name { min-width: 0; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; max-width: 180px; }
.file .size { color: var(--sb-muted); white-space: nowrap; }
.file .remove { border: 0; background: none; color: var(--sb-fg); cursor: pointer; font-size: 16px; line-height: 1; padding: 0 2px; }
.file progress { width: 56px; height: 6px; }
.file[data-state="failed"] { border-color: var(--sb-danger); }
.file .failed { color: var(--sb-danger); white-space: nowrap; }
.msg .body:empty { display: none; }
.panel.dragging { outline: 3px dashed var(--sb-link); outline-offset: -6px; }
.dropzone { padding: 6px 12px; font-size: 13px; color: var(--sb-link); text-align: center; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
@media (max-width: 480px) {
  .panel { inset: 0; width: 100%; height: 100%; max-height: none; border-radius: 0; border: 0; }
  .launcher { right: 12px; bottom: 12px; }
  :host([data-open="true"]) .launcher { display: none; }
}`;

  // el builds an element; text is always set as text, never as HTML.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) if (c) e.append(c);
    return e;
  }

  // Icons are inline SVG drawn with the text colour (stroke="currentColor"),
  // not emoji: a system without an emoji font would show empty boxes.
  const SVG_NS = "http://www.w3.org/2000/svg"; // a name; nothing is fetched
  const ICONS = {
    chat: ["M5 4h14a2 2 0 0 1 2 2v9a2 2 0 0 1-2 2H10l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z"],
    tool: ["M17.2 3.8L15.8 7.2L16.8 8.2L20.2 6.8A5 5 0 1 1 17.2 3.8z", "M12 12L4.5 19.5"],
    check: ["M5 12.5l4.5 4.5L19 7"],
    warning: ["M12 3L22 20H2z", "M12 9v5", "M12 17.2v.01"],
    image: ["M4 5h16v14H4z", "M4 17l5-5 4 4 3-3 4 4", "M14.5 9a1.5 1.5 0 1 0 3 0a1.5 1.5 0 1 0-3 0"],
    clip: ["M20.5 11.5l-8.2 8.2a5 5 0 0 1-7.1-7.1l8.5-8.5a3.3 3.3 0 0 1 4.7 4.7l-8.5 8.5a1.7 1.7 0 0 1-2.4-2.4l7.8-7.8"],
    file: ["M14 3H7a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h10a2 2 0 0 0 2-2V8z", "M14 3v5h5"],
    // A plan step's states: to do, in progress, failed (done is check).
    pending: ["M12 5a7 7 0 1 0 0 14a7 7 0 1 0 0-14z"],
    progress: ["M12 5a7 7 0 1 0 0 14a7 7 0 1 0 0-14z", "M12 8v4l3 2"],
    cross: ["M6 6l12 12", "M18 6L6 18"],
  };

  // icon is a decorative SVG (hidden from screen readers), 1em square.
  function icon(name) {
    const svg = document.createElementNS(SVG_NS, "svg");
    const attrs = {
      class: "icon icon-" + name, viewBox: "0 0 24 24", fill: "none", stroke: "currentColor", "stroke-width": "2",
      "stroke-linecap": "round", "stroke-linejoin": "round", "aria-hidden": "true", focusable: "false",
    };
    for (const [k, v] of Object.entries(attrs)) svg.setAttribute(k, v);
    for (const d of ICONS[name]) {
      const path = document.createElementNS(SVG_NS, "path");
      path.setAttribute("d", d);
      svg.append(path);
    }
    return svg;
  }

  function newID() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  // base64 is an ArrayBuffer's bytes in standard base64.
  function base64(buf) {
    const b = new Uint8Array(buf);
    let s = "";
    for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
    return btoa(s);
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  // thumbnail draws a picture the person chose, from its bytes, as a small
  // data: URL (no blob: URL: a page's Content-Security-Policy often
  // allows data: images only); null for a file that is no picture.
  async function thumbnail(file) {
    if (!/^image\/(png|jpeg|gif|webp)$/.test(file.type) || !window.createImageBitmap) return null;
    try {
      const bmp = await createImageBitmap(file);
      const scale = Math.min(1, 96 / Math.max(bmp.width, bmp.height));
      const cv = document.createElement("canvas");
      cv.width = Math.max(1, Math.round(bmp.width * scale));
      cv.height = Math.max(1, Math.round(bmp.height * scale));
      cv.getContext("2d").drawImage(bmp, 0, 0, cv.width, cv.height);
      bmp.close();
      return cv.toDataURL("image/png");
    } catch {
      return null;
    }
  }

  function pretty(args) {
    if (args === undefined || args === null) return "";
    return typeof args === "string" ? args : JSON.stringify(args, null, 2);
  }

  // cardImage is how a card's image is shown. An image loads without a
  // click, so a URL chosen by the model could carry what it read out of
  // the page: only inline data, the gateway's own origin, and hosts the
  // gateway allows (image_allowed, from listeners.websocket.image_hosts)
  // are shown as images; any other http(s) URL is a link the user may
  // follow; other schemes nothing.
  function cardImage(img, allowed) {
    if (!img) return null;
    const alt = img.alt || "";
    if (img.data && /^image\/[a-z0-9.+-]+$/i.test(img.mime_type || "")) {
      return el("img", { src: "data:" + img.mime_type + ";base64," + img.data, alt });
    }
    if (!img.url) return null;
    if (/^data:image\//i.test(img.url)) return el("img", { src: img.url, alt });
    let u;
    try { u = new URL(img.url); } catch { return null; }
    if (u.protocol !== "https:" && u.protocol !== "http:") return null;
    if (u.origin === scriptBase.origin || allowed === true) {
      return el("img", { src: u.href, alt, loading: "lazy", referrerpolicy: "no-referrer" });
    }
    return el("p", { class: "image-link" },
      el("a", { href: u.href, target: "_blank", rel: "noopener noreferrer nofollow" }, icon("image"), " " + (alt || u.host)));
  }

  // initials are what a person's round badge shows: "Carol Diaz" → "CD".
  function initials(name) {
    const words = (name || "?").trim().split(/\s+/).filter(Boolean);
    return words.slice(0, 2).map((w) => Array.from(w)[0]).join("").toUpperCase() || "?";
  }

  // STATE_TEXT are the strings of the session's states.
  const STATE_TEXT = { thinking: "thinking", executing_tool: "runningTool", awaiting_confirmation: "awaitingApproval" };

  // parseStrings reads the strings attribute: a JSON object of strings.
  function parseStrings(json) {
    if (!json) return {};
    try {
      const o = JSON.parse(json);
      if (o && typeof o === "object" && !Array.isArray(o)) return o;
    } catch { /* below */ }
    console.warn("switchboard-chat: the strings attribute is not a JSON object of strings; ignored");
    return {};
  }

  class SwitchboardChat extends HTMLElement {
    // The defaults, for a page that translates them all.
    static get strings() { return Object.assign({}, STRINGS); }
    static get observedAttributes() { return ["strings"]; }

    constructor() {
      super();
      this.attachShadow({ mode: "open" });
      this.ws = null;
      this.session = "";      // the session the transcript shows
      this.lastSeq = 0;       // last session event handled
      this.myRole = "";     // our role in the session, from ready (not this.role: that is the ARIA attribute)
      this.me = "";           // our user id, from ready
      this.attached = false;
      this.pending = [];      // what was typed and not yet seen back: {id, text, bubble, sent, command}
      this.attempt = 0;
      this.timer = 0;
      this.failedOpens = 0;   // connections in a row that closed without opening
      this.stopped = false;   // refused (1008, or the origin): wait for the user
      this.texts = {};        // the page's strings, over STRINGS
      this.built = false;
      this.welcome = null;    // the greeting and suggestions, while the conversation is empty
      this.listed = false;    // we were in the last list of people: leaving it means we left
      this.fileWaiters = new Map(); // file id → the upload waiting for file_saved: {ws, resolve, reject, stopped}
      this.chain = Promise.resolve(); // this connection's messages with files (and those after them), in order
      this.outgoing = 0;      // messages in the chain
    }

    // t is one of the widget's texts, translated if the page says so.
    t(key, vars) {
      const s = typeof this.texts[key] === "string" ? this.texts[key] : STRINGS[key];
      return fill(s === undefined ? key : s, vars);
    }

    get strings() { return Object.assign({}, STRINGS, this.texts); }
    set strings(v) { this.setAttribute("strings", JSON.stringify(v || {})); }

    attributeChangedCallback(name, old, value) {
      if (name !== "strings") return;
      this.texts = parseStrings(value);
      if (this.built) this.applyStrings();
    }

    // channelName is where someone writes from, as people know the apps.
    channelName(ch) {
      const k = "channel" + cap(ch || "");
      return k in STRINGS ? this.t(k) : ch || "";
    }

    // ago is how long since an ISO time, as people say it: "3m", "2h", "4d".
    ago(iso) {
      const ms = Date.now() - new Date(iso).getTime();
      if (!(ms >= 60000)) return this.t("agoMoments");
      if (ms < 3600000) return this.t("agoMinutes", { n: Math.floor(ms / 60000) });
      if (ms < 48 * 3600000) return this.t("agoHours", { n: Math.floor(ms / 3600000) });
      return this.t("agoDays", { n: Math.floor(ms / 86400000) });
    }

    // memberLabel says who someone is, where and what they may do:
    // "Carol · Slack · approver · here now".
    memberLabel(m, me) {
      const where = m.here ? this.t("hereNow") : m.last_seen ? this.t("lastSeen", { ago: this.ago(m.last_seen) }) : this.t("notSeenYet");
      const role = "role" + cap(m.role || "");
      return [me ? this.t("you", { name: m.name }) : m.name, this.channelName(m.channel), role in STRINGS ? this.t(role) : m.role, where].join(" · ");
    }

    get server() { return this.getAttribute("server") || defaultServer.href; }
    get guide() { return this.getAttribute("guide") || ""; }
    // invite is an invite code (the /s/ link page sets it): join with it.
    get invite() { return (this.getAttribute("invite") || "").trim().toLowerCase(); }
    // An invite remembers the session it led to under a key of its own, so
    // a reload of the link re-attaches there (without spending another use
    // of the code) and the visitor's own conversation is left as it was.
    get storageKey() {
      if (this.invite) return "switchboard:" + this.server + ":invite:" + this.invite;
      return "switchboard:" + this.server + ":" + this.guide;
    }

    connectedCallback() {
      // strings set on the element before this script defined it.
      if (Object.prototype.hasOwnProperty.call(this, "strings")) {
        const v = this.strings;
        delete this.strings;
        this.strings = v;
      }
      if (!this.built) this.build();
      this.onOnline = () => { if (!this.ws && !this.stopped && this.wanted) this.connect(); };
      window.addEventListener("online", this.onOnline);
      const stored = this.load();
      if (stored.session) this.session = stored.session;
      if (this.hasAttribute("open")) this.setOpen(true, false);
      else if (this.session) this.connect(); // carry on a conversation after a reload
    }

    disconnectedCallback() {
      window.removeEventListener("online", this.onOnline);
      clearTimeout(this.timer);
      this.wanted = false;
      if (this.ws) this.ws.close(1000);
    }

    load() {
      try { return JSON.parse(localStorage.getItem(this.storageKey) || "{}"); } catch { return {}; }
    }

    save() {
      try { localStorage.setItem(this.storageKey, JSON.stringify({ session: this.session })); } catch { /* private mode */ }
    }

    // userID is a stable anonymous id for gateways without sign-in, so a
    // reconnect or reload is the same user (and keeps the owner's role).
    userID() {
      try {
        let id = localStorage.getItem("switchboard:user");
        if (!id) { id = "web-" + newID(); localStorage.setItem("switchboard:user", id); }
        return id;
      } catch {
        this.anon = this.anon || "web-" + newID();
        return this.anon;
      }
    }

    build() {
      this.built = true;
      this.heading = this.getAttribute("title"); // null: the strings' title
      this.removeAttribute("title"); // not a tooltip on the whole page corner
      const root = this.shadowRoot;
      root.append(el("style", { text: STYLE }));
      const panelID = "sb-panel";
      this.launcher = el("button", {
        class: "launcher", type: "button", "aria-controls": panelID, "aria-expanded": "false",
        onclick: () => this.setOpen(!this.isOpen, true),
      }, icon("chat"));
      this.log = el("div", { class: "log", role: "log", "aria-live": "polite" });
      this.stateLine = el("div", { class: "state", role: "status", "aria-live": "polite" });
      this.input = el("textarea", {
        rows: "1", maxlength: "16000",
        onkeydown: (e) => {
          if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); this.sendInput(); }
        },
      });
      this.sendButton = el("button", { class: "send", type: "submit" });
      // Files: the attach button opens the file picker; a file dropped on
      // the panel or a picture pasted into the message box does the same.
      // Each waits as a chip in the tray until the message is sent.
      this.staged = [];
      this.fileInput = el("input", {
        type: "file", multiple: true, hidden: true, tabindex: "-1",
        onchange: () => { this.addFiles(this.fileInput.files); this.fileInput.value = ""; },
      });
      this.attachButton = el("button", { class: "attach", type: "button", onclick: () => this.fileInput.click() }, icon("clip"));
      this.input.addEventListener("paste", (e) => {
        const files = e.clipboardData ? [...e.clipboardData.files] : [];
        if (!files.length) return;
        this.addFiles(files);
        // A picture alone is taken; text that came with it is pasted too.
        if (![...e.clipboardData.types].includes("text/plain")) e.preventDefault();
      });
      this.tray = el("ul", { class: "tray", hidden: true });
      this.dropzone = el("div", { class: "dropzone", role: "status", hidden: true });
      this.compose = el("form", { class: "compose", onsubmit: (e) => { e.preventDefault(); this.sendInput(); } },
        this.attachButton, this.fileInput, this.input, this.sendButton);
      // The people of a shared conversation, and the owner's Share button.
      this.people = el("ul", { class: "people", hidden: true });
      this.shareButton = el("button", { class: "share", type: "button", hidden: true, onclick: () => this.share() });
      this.linkBox = el("div", { class: "share-link", role: "group", hidden: true });
      this.titleEl = el("h2");
      this.closeButton = el("button", { class: "close", type: "button", text: "×", onclick: () => this.setOpen(false, true) });
      const dragging = (e) => e.dataTransfer && [...e.dataTransfer.types].includes("Files") && !this.input.disabled;
      this.panel = el("section", {
        class: "panel", id: panelID, role: "dialog", hidden: true,
        onkeydown: (e) => { if (e.key === "Escape") { this.setOpen(false, true); } },
        ondragover: (e) => {
          if (!dragging(e)) return;
          e.preventDefault();
          e.dataTransfer.dropEffect = "copy";
          this.panel.classList.add("dragging");
          this.dropzone.hidden = false;
        },
        ondragleave: (e) => {
          if (e.relatedTarget && this.panel.contains(e.relatedTarget)) return;
          this.panel.classList.remove("dragging");
          this.dropzone.hidden = true;
        },
        ondrop: (e) => {
          this.panel.classList.remove("dragging");
          this.dropzone.hidden = true;
          if (!dragging(e)) return;
          e.preventDefault();
          this.addFiles(e.dataTransfer.files);
          this.input.focus();
        },
      },
      el("header", {}, el("span", { class: "dot", "aria-hidden": "true" }), this.titleEl,
        this.people, this.shareButton, this.closeButton),
      this.linkBox, this.log, this.stateLine, this.dropzone, this.tray, this.compose);
      this.placeholderKey = "placeholder"; // which string the empty message box shows
      this.applyStrings();
      root.append(this.launcher, this.panel);
    }

    // applyStrings (re)labels the panel's fixed parts with the strings.
    applyStrings() {
      const title = this.heading || this.t("title");
      this.launcher.setAttribute("aria-label", this.t("openChat", { title }));
      this.panel.setAttribute("aria-label", title);
      this.titleEl.textContent = title;
      this.log.setAttribute("aria-label", this.t("conversation"));
      this.input.setAttribute("aria-label", this.t("messageLabel"));
      this.input.placeholder = this.t(this.placeholderKey);
      this.sendButton.textContent = this.t("send");
      this.people.setAttribute("aria-label", this.t("people"));
      this.shareButton.textContent = this.t("share");
      this.shareButton.title = this.t("shareTitle");
      this.linkBox.setAttribute("aria-label", this.t("inviteLink"));
      this.closeButton.setAttribute("aria-label", this.t("closeChat"));
      this.attachButton.setAttribute("aria-label", this.t("attach"));
      this.attachButton.title = this.t("attach");
      this.tray.setAttribute("aria-label", this.t("filesToSend"));
      this.dropzone.textContent = this.t("dropFiles");
    }

    // setWritable enables or disables what writes: the message box and
    // the attach button.
    setWritable(on) {
      this.input.disabled = !on;
      this.attachButton.disabled = !on;
    }

    // setPlaceholder shows one of the strings in the empty message box.
    setPlaceholder(key) {
      this.placeholderKey = key;
      this.input.placeholder = this.t(key);
    }

    get isOpen() { return !this.panel.hidden; }

    setOpen(open, focus) {
      this.panel.hidden = !open;
      this.launcher.setAttribute("aria-expanded", String(open));
      this.dataset.open = String(open);
      if (open) {
        this.wanted = true;
        if (!this.ws && !this.stopped) this.connect();
        if (focus) this.input.focus();
        this.scrollDown();
      } else if (focus) {
        this.launcher.focus();
      }
    }

    // --- connection ---

    connect() {
      clearTimeout(this.timer);
      this.wanted = true;
      let ws;
      try {
        ws = new WebSocket(this.server);
      } catch (e) {
        this.notice(this.t("cannotConnect", { server: this.server, error: e.message }));
        return;
      }
      this.ws = ws;
      this.attached = false;
      this.chain = Promise.resolve();
      this.outgoing = 0;
      let opened = false;
      this.setStatus(this.t(this.wasAttached ? "reconnecting" : "connecting"));
      ws.onopen = () => {
        opened = true;
        this.failedOpens = 0;
        this.hello();
      };
      ws.onmessage = (m) => {
        let ev;
        try { ev = JSON.parse(m.data); } catch { return; }
        this.handle(ev);
      };
      ws.onclose = (e) => {
        // Files on their way are sent again on the next connection.
        for (const [id, w] of this.fileWaiters) {
          if (w.ws !== ws) continue;
          this.fileWaiters.delete(id);
          w.stopped = true;
          w.reject({ code: "closed" });
        }
        if (this.ws !== ws) return;
        this.ws = null;
        this.attached = false;
        this.dataset.connected = "false";
        for (const p of this.pending) p.sent = false;
        if (e.code === 1008) {
          // Policy: a bad or expired token, or a session we may not see.
          // Retrying would be refused the same way.
          this.stopped = true;
          while (this.pending.length) this.failPending(0);
          this.notice(this.t("disconnected", { reason: e.reason || this.t("notAllowed") }));
          this.setStatus("");
          return;
        }
        if (!this.wanted) return;
        // The conversation stays on screen, and what is typed meanwhile
        // waits as "sending…" (sendText).
        this.setStatus(this.t("reconnecting"));
        if (opened) return this.retry();
        this.failedOpens++;
        if (this.failedOpens < REFUSAL_TRIES) return this.retry();
        this.probe().then((up) => {
          if (this.ws || this.stopped || !this.wanted) return; // moved on meanwhile
          if (up) this.refused();
          else this.retry();
        });
      };
    }

    // retry connects again after a while: 0.5 s doubling to 15 s, jittered.
    retry() {
      const delay = Math.min(15000, 500 * 2 ** this.attempt) * (0.5 + Math.random() / 2);
      this.attempt++;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.connect(), delay);
    }

    // probe answers, once connections keep closing without ever opening,
    // whether the gateway is up: whether its widget.js answers a CORS
    // request. A browser hides why a WebSocket handshake failed (a 403 for
    // an origin not allowed looks like a gateway that is down), but
    // widget.js is served to every origin (Access-Control-Allow-Origin: *),
    // so this request succeeds, from any page, exactly when the gateway
    // itself answers: not when it is down or unreachable, nor when a proxy
    // in front of it answers with an error page of its own (no such
    // header: the request fails), nor from the HTTP cache (no-store).
    probe() {
      let url;
      try {
        url = new URL("widget.js", new URL(this.server.replace(/^ws/i, "http"), location.href));
      } catch {
        return Promise.resolve(false);
      }
      return fetch(url, { method: "HEAD", mode: "cors", credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer" })
        .then((r) => r.ok, () => false);
    }

    // refused: the gateway is up, yet it never lets this page's socket
    // open: it refuses the page's origin (listeners.websocket
    // .allowed_origins). Trying again changes nothing.
    refused() {
      this.stopped = true;
      this.wanted = false;
      clearTimeout(this.timer);
      this.setStatus("");
      this.setWritable(false);
      this.setPlaceholder("originRefused");
      while (this.pending.length) this.failPending(0);
      this.notice(this.t("originRefused"));
    }

    hello() {
      const f = { type: "hello", user: { id: this.userID() } };
      const name = this.getAttribute("user-name");
      if (name) f.user.name = name;
      if (this.guide) f.guide = this.guide;
      const token = this.getAttribute("token");
      if (token) f.token = token;
      if (this.session) {
        f.session = this.session;
        f.resume_after = this.lastSeq; // 0 after a reload: replay it all
      } else if (this.invite) {
        // Join the invite's session, with everything said so far; the
        // guide is the session's.
        delete f.guide;
        f.invite = this.invite;
        f.resume_after = 0;
      }
      this.send(f);
    }

    send(f) {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
      this.ws.send(JSON.stringify(f));
      return true;
    }

    // --- events ---

    handle(ev) {
      if (ev.seq > 0) {
        if (ev.seq <= this.lastSeq) return; // replayed and already shown
        this.lastSeq = ev.seq;
      }
      // Anything in the conversation (a replayed or new event) ends the welcome.
      if (ev.seq > 0) this.clearWelcome();
      const d = ev.data || {};
      switch (ev.type) {
        case "ready": return this.onReady(d);
        case "message": return this.onMessage(d);
        case "delta": return this.onDelta(d);
        case "tool_call": return this.onToolCall(d);
        case "tool_response": return this.onToolResponse(d);
        case "plan": return this.onPlan(d);
        case "confirmation_request": return this.onConfirmationRequest(d);
        case "confirmation_resolved": return this.onConfirmationResolved(d);
        case "ui": return this.onUI(d);
        case "state": return this.onState(d);
        case "error": return this.onError(ev, d);
        case "members": return this.onMembers(d);
        case "compaction": return this.show(el("div", { class: "compaction", text: this.t("compacted") }));
        case "handoff": return this.onHandoff(d);
        case "file_saved": return this.onFileSaved(d);
      }
    }

    // onHandoff shows the conversation passing to another guide as a
    // line of the transcript, as text (the model's reason is never HTML).
    onHandoff(d) {
      const reason = (d.reason || "").trim();
      const text = reason ? this.t("passedToWhy", { to: d.to, reason }) : this.t("passedTo", { to: d.to });
      return this.show(el("div", { class: "handoff", text }));
    }

    onReady(d) {
      if (d.session !== this.session) {
        // A new conversation: the first, a /reset on this connection, or
        // a stored one that is gone. Its events start at seq 1.
        if (this.session) this.clearLog();
        this.linkBox.hidden = true; // an invite to the conversation before
        this.lastSeq = 0;
      }
      this.session = d.session;
      this.myRole = d.role;
      this.me = d.user ? d.user.id : "";
      this.attached = true;
      this.wasAttached = true;
      this.attempt = 0;
      this.dataset.connected = "true";
      this.dataset.session = d.session;
      this.save();
      this.setStatus("");
      this.showPeople(d.members || []);
      this.shareButton.hidden = d.role !== "owner";
      const viewer = d.role === "viewer";
      this.setWritable(!viewer);
      this.setPlaceholder(viewer ? "placeholderViewer" : "placeholder");
      // Send what waits, and again what may not have arrived: the gateway
      // answers a repeated id once.
      for (const p of [...this.pending]) this.sendPending(p);
      this.showWelcome(d);
    }

    // showWelcome shows the guide's greeting (as text) and suggested first
    // prompts (as buttons) in an empty conversation only: not when the
    // session has events (they are being replayed) or a message is on its
    // way. The conversation's first event, or sending, removes them.
    showWelcome(d) {
      this.clearWelcome();
      if (d.last_seq > 0 || this.pending.length || this.log.querySelector(".msg, .tool, .confirm, .card")) return;
      const suggestions = this.input.disabled ? [] : (d.suggestions || []).filter((s) => typeof s === "string" && s.trim());
      if (!d.greeting && !suggestions.length) return;
      const chips = suggestions.length ? el("div", { class: "suggestions", role: "group", "aria-label": this.t("suggestions") },
        ...suggestions.map((s) => el("button", {
          type: "button", text: s,
          onclick: () => {
            if (this.input.disabled) return;
            this.sendText(s.trim());
            this.input.focus(); // the button is gone
          },
        }))) : null;
      this.welcome = el("div", { class: "welcome" },
        d.greeting ? el("p", { class: "greeting", text: d.greeting }) : null, chips);
      this.log.prepend(this.welcome);
    }

    clearWelcome() {
      if (!this.welcome) return;
      this.welcome.remove();
      this.welcome = null;
    }

    onError(ev, d) {
      if (d.code === "not_found" && !this.attached && this.session) {
        // The stored session is gone (another gateway, a wiped store): start afresh.
        this.session = "";
        this.lastSeq = 0;
        this.clearLog();
        this.save();
        this.hello();
        return;
      }
      if (d.code === "duplicate") return; // a resend after a reconnect: expected, and answered once
      if (d.file_id) {
        // A file of ours was not saved: the message it was for is not
        // sent (upload), and the notice says why.
        const w = this.fileWaiters.get(d.file_id);
        if (w) {
          this.fileWaiters.delete(d.file_id);
          w.stopped = true;
          w.reject(d);
        }
        this.notice(d.message || d.code || this.t("error"));
        return;
      }
      if ((d.code === "busy" || d.code === "forbidden" || d.code === "file_refused" || d.code === "guardrail_blocked" || d.code === "budget_exceeded") && this.attached) {
        // Refused, not taken (a tool call waits for approval, a full
        // queue, the guide's guardrails, a budget reached): the oldest
        // message sent is the one refused. It is not sent again by
        // itself; the notice says why. (A budget reached during a turn
        // tells its writer too: their message was taken by then, so none
        // waits, or the next one does, which the budget refuses as well.)
        const i = this.pending.findIndex((p) => p.sent);
        if (i >= 0) this.failPending(i);
      }
      if (!this.attached && !this.session && this.invite && ["not_found", "forbidden", "busy"].includes(d.code)) {
        // The code cannot be used (unknown, expired, used up, withdrawn,
        // or too many tries): say why and stop; trying again changes nothing.
        this.stopped = true;
        this.wanted = false;
        if (this.ws) this.ws.close(1000);
        this.setWritable(false);
        this.setPlaceholder("inviteUnusableShort");
        this.setStatus("");
        while (this.pending.length) this.failPending(0);
        this.notice(this.t("inviteUnusable", { reason: d.message || d.code }));
        return;
      }
      if (d.code === "info") {
        // A private answer, not an error (the invite code /share made):
        // shown as the gateway's own line, its text there to copy.
        const b = el("div", { class: "msg", "data-role": "system" }, el("div", { class: "body", text: d.message || "" }));
        this.show(b);
        if (d.link) this.showLink(d.link);
        return;
      }
      if (d.code === "interrupted") {
        // What was streamed of the cut answer stays, marked, and a new
        // answer follows in its own bubble.
        for (const b of this.log.querySelectorAll(".msg.streaming")) {
          b.classList.remove("streaming");
          b.classList.add("interrupted");
          b.dataset.done = "true";
          b.append(el("span", { class: "cut", text: this.t("interrupted") }));
        }
      }
      this.notice(d.message || d.code || this.t("error"));
    }

    bubble(id, role) {
      let b = id ? this.log.querySelector(`.msg[data-id="${CSS.escape(id)}"]`) : null;
      if (!b) {
        b = el("div", { class: "msg", "data-role": role, "data-id": id || undefined });
        b.append(el("div", { class: "body" }));
        this.show(b);
      }
      return b;
    }

    onDelta(d) {
      const b = this.bubble(d.message_id, "assistant");
      if (!b.dataset.done) {
        b.classList.add("streaming");
        b.querySelector(".body").append(document.createTextNode(d.content || ""));
        this.scrollDown();
      }
    }

    onMessage(d) {
      const mine = d.role === "user" && d.author_id && d.author_id === this.me && (!d.channel || d.channel === "web");
      // Our own message back from the session: its "sending…" bubble is
      // now the message, where the session put it.
      if (mine) this.confirmPending(d);
      const b = this.bubble(d.id, d.role || "assistant");
      b.dataset.done = "true";
      b.classList.remove("streaming");
      const body = b.querySelector(".body");
      if (d.html !== undefined) body.innerHTML = d.html; // rendered and sanitised by the gateway
      else body.textContent = d.content || "";
      if (d.files && d.files.length) {
        const shown = b.querySelector(".files");
        if (shown) {
          // Our own, sent from here: its chips (with the pictures' thumbnails) stay.
          shown.querySelectorAll("progress, .failed").forEach((x) => x.remove());
          shown.querySelectorAll(".file").forEach((x) => { delete x.dataset.state; });
        } else {
          body.after(this.fileList(d.files, false));
        }
      }
      if (d.role === "user") {
        b.dataset.mine = String(Boolean(mine));
        // Written elsewhere: "Carol · Slack".
        const where = d.channel && d.channel !== "web" ? " · " + this.channelName(d.channel) : "";
        if (!b.querySelector(".author")) b.prepend(el("span", { class: "author", text: (d.author || this.t("someone")) + where }));
      }
      if (d.role === "assistant" && d.model && /demo/i.test(d.model) && !b.querySelector(".model")) {
        b.append(el("span", { class: "model", text: d.model }));
      }
      this.scrollDown();
    }

    // confirmPending takes the message d, our own, off the pending list;
    // its bubble becomes d's (moved to the end: the session's order).
    confirmPending(d) {
      const text = (d.content || "").trim();
      const n = (d.files || []).length;
      const i = this.pending.findIndex((p) => !p.command && p.text === text && p.files.length === n);
      if (i < 0) return; // written in another tab
      const [p] = this.pending.splice(i, 1);
      const b = p.bubble;
      if (!b.isConnected || (d.id && this.log.querySelector(`.msg[data-id="${CSS.escape(d.id)}"]`))) {
        b.remove();
        return;
      }
      delete b.dataset.pending;
      b.querySelector(".sending").remove();
      if (d.id) b.dataset.id = d.id;
      this.log.append(b);
    }

    // sendPending sends a waiting message (or command) on the attached
    // connection. A command is not a message of the conversation (its
    // answer is): once sent it is no longer shown, nor kept.
    sendPending(p) {
      if (!this.attached) return false;
      if (p.files.length || this.outgoing) {
        // Its files go first; and a message after one with files waits
        // for it, so the conversation has them in the order written.
        this.queue(p);
        return true;
      }
      return this.sendNow(p);
    }

    sendNow(p) {
      const f = { type: "input", id: p.id, text: p.text };
      if (p.files.length) f.files = p.files.map((x) => x.wireID);
      if (!this.send(f)) return false;
      p.sent = true;
      if (p.command) {
        p.bubble.remove();
        this.pending.splice(this.pending.indexOf(p), 1);
      }
      return true;
    }

    // queue sends p on this connection once the messages queued before it
    // are sent, its files first.
    queue(p) {
      const ws = this.ws;
      if (p.queuedOn === ws) return; // under way on this connection
      p.queuedOn = ws;
      this.outgoing++;
      this.chain = this.chain.then(() => this.uploadAndSend(p, ws)).catch(() => {}).finally(() => {
        if (this.ws === ws) this.outgoing--;
      });
    }

    // uploadAndSend sends p's files one by one (those not saved on this
    // connection yet), then p. A file refused fails the message: its chip
    // and the notice say why. A connection lost meanwhile leaves p for
    // the next one (onReady sends what is pending again).
    async uploadAndSend(p, ws) {
      if (this.ws !== ws || !this.pending.includes(p)) return;
      for (const f of p.files) {
        if (f.savedOn === ws) continue;
        try {
          f.saved = await this.sendFile(ws, f);
          f.savedOn = ws;
        } catch (e) {
          if (e && e.code === "closed") return;
          if (f.chip) {
            f.chip.dataset.state = "failed";
            f.chip.querySelector("progress")?.remove();
            if (!f.chip.querySelector(".failed")) f.chip.append(el("span", { class: "failed", text: this.t("fileNotSaved") }));
          }
          const i = this.pending.indexOf(p);
          if (i >= 0) this.failPending(i);
          return;
        }
      }
      if (this.ws === ws && this.attached && this.pending.includes(p)) this.sendNow(p);
    }

    // sendFile announces f and sends its bytes in chunks; it resolves with
    // the saved file (file_saved) or rejects with the error about it, or
    // {code: "closed"} when the connection goes first.
    sendFile(ws, f) {
      return new Promise((resolve, reject) => {
        const id = "f-" + newID();
        f.wireID = id;
        const w = { ws, resolve, reject, stopped: false };
        this.fileWaiters.set(id, w);
        const progress = f.chip && f.chip.querySelector("progress");
        if (progress) progress.value = 0;
        if (!this.send({ type: "file", id, name: f.name, size: f.size })) {
          this.fileWaiters.delete(id);
          reject({ code: "closed" });
          return;
        }
        (async () => {
          for (let off = 0; off < f.size; off += CHUNK) {
            while (ws.readyState === WebSocket.OPEN && ws.bufferedAmount > QUEUED && !w.stopped) await sleep(20);
            if (w.stopped || ws.readyState !== WebSocket.OPEN) return;
            const buf = await f.file.slice(off, off + CHUNK).arrayBuffer();
            if (w.stopped || ws.readyState !== WebSocket.OPEN) return;
            ws.send(JSON.stringify({ type: "file_chunk", id, data: base64(buf) }));
            if (progress) progress.value = Math.min(f.size, off + CHUNK);
          }
        })().catch((e) => {
          // The file cannot be read any more (moved, deleted): the gateway
          // drops what it has of it.
          if (w.stopped) return;
          w.stopped = true;
          this.fileWaiters.delete(id);
          this.notice(this.t("fileUnreadable", { name: f.name, error: e && e.message ? e.message : String(e) }));
          reject({ code: "unreadable" });
        });
      });
    }

    onFileSaved(d) {
      const w = this.fileWaiters.get(d.id);
      if (!w) return;
      this.fileWaiters.delete(d.id);
      w.stopped = true;
      w.resolve(d.file || {});
    }

    // size is a byte count as people read it.
    size(n) {
      if (!(n >= 1024)) return this.t("bytes", { n: n || 0 });
      if (n < 1048576) return this.t("kib", { n: (n / 1024).toFixed(1) });
      return this.t("mib", { n: (n / 1048576).toFixed(1) });
    }

    // fileChip is one file: a thumbnail of a picture this page has the
    // bytes of (one the person chose here), else a file icon; its name
    // and size.
    fileChip(f) {
      const li = el("li", { class: "file", title: f.name });
      const img = el("img", { alt: "", hidden: true });
      const generic = icon("file");
      const show = (url) => {
        if (!url) return;
        img.src = url;
        img.hidden = false;
        generic.remove();
      };
      li.append(img, generic, el("span", { class: "name", text: f.name }), " ", el("span", { class: "size", text: this.size(f.size) }));
      if (f.thumb) show(f.thumb);
      else if (f.thumbing) f.thumbing.then(show);
      return li;
    }

    // fileList is the files shared with a message, under it.
    fileList(files, sending) {
      return el("ul", { class: "files", "aria-label": this.t("sharedFiles") }, ...files.map((f) => {
        const li = this.fileChip(f);
        if (sending) {
          f.chip = li;
          li.append(el("progress", { max: String(f.size), value: "0", "aria-label": this.t("fileProgress", { name: f.name }) }));
        }
        return li;
      }));
    }

    // addFiles stages files for the next message (the attach button, a
    // drop, a paste), as chips in the tray.
    addFiles(list) {
      if (this.input.disabled) return;
      for (const file of list) {
        if (!file.size) {
          this.notice(this.t("fileEmpty", { name: file.name }));
          continue;
        }
        const f = { file, name: file.name || "file", size: file.size, type: file.type };
        f.thumbing = thumbnail(file).then((url) => (f.thumb = url));
        this.staged.push(f);
      }
      this.showTray();
    }

    // showTray shows the staged files, each with a button to remove it.
    showTray() {
      this.tray.replaceChildren(...this.staged.map((f) => {
        const li = this.fileChip(f);
        li.append(el("button", {
          class: "remove", type: "button", text: "×", "aria-label": this.t("removeFile", { name: f.name }),
          onclick: () => {
            this.staged.splice(this.staged.indexOf(f), 1);
            this.showTray();
            this.input.focus();
          },
        }));
        return li;
      }));
      this.tray.hidden = !this.staged.length;
    }

    // failPending marks pending[i] "not sent" and forgets it.
    failPending(i) {
      const [p] = this.pending.splice(i, 1);
      if (p.command) return p.bubble.remove();
      p.bubble.dataset.pending = "failed";
      p.bubble.querySelector(".sending").textContent = this.t("notSent");
    }

    // clearLog empties the conversation but for the messages still waiting.
    clearLog() {
      this.log.replaceChildren(...this.pending.map((p) => p.bubble));
    }

    // toolSummary is a tool call's one line: the tool icon, its name, and
    // once answered " failed" or a check mark ("done" to screen readers).
    toolSummary(name, outcome) {
      const s = el("summary", {}, icon("tool"), " " + (name || ""));
      if (outcome === "failed") s.append(" " + this.t("toolFailed"));
      else if (outcome === "done") s.append(" ", icon("check"), el("span", { class: "sr-only", text: this.t("toolDone") }));
      return s;
    }

    // onPlan shows the model's plan as a checklist, replaced in place by
    // each new version within the turn; the turn's tool runs are tasks
    // under it (planTask). A turn's end (idle) closes it: the next turn's
    // plan is a checklist of its own.
    onPlan(d) {
      const steps = Array.isArray(d.steps) ? d.steps : [];
      if (!this.plan || !this.plan.isConnected) {
        this.plan = el("div", { class: "plan", role: "group", "aria-label": this.t("plan") },
          el("p", { class: "title" }), el("ol", { class: "steps" }), el("ul", { class: "tasks" }));
        this.show(this.plan);
      }
      const done = steps.filter((s) => s.status === "done").length;
      this.plan.querySelector(".title").textContent = this.t("planProgress", { done, total: steps.length });
      this.plan.querySelector(".steps").replaceChildren(...steps.map((s, i) => this.planRow(String(i + 1) + ". " + (s.title || ""), s.status)));
      this.scrollDown();
    }

    planRow(text, status) {
      const marks = { pending: "pending", in_progress: "progress", done: "check", failed: "cross" };
      const words = { pending: "planPending", in_progress: "planInProgress", done: "planDone", failed: "planFailed" };
      const st = marks[status] ? status : "pending";
      return el("li", { "data-status": st },
        el("span", { class: "mark" }, icon(marks[st])),
        el("span", { class: "text", text }),
        el("span", { class: "sr-only", text: " (" + this.t(words[st]) + ")" }));
    }

    // planTask shows a tool run as a task of the plan under way, reporting
    // whether there is one: its row goes from in progress to done or failed.
    planTask(id, name, status) {
      if (!this.plan || !this.plan.isConnected) return false;
      const tasks = this.plan.querySelector(".tasks");
      const row = this.planRow(name || "", status);
      row.dataset.call = id || "";
      const old = tasks.querySelector(`li[data-call="${CSS.escape(id || "")}"]`);
      if (old) old.replaceWith(row);
      else tasks.append(row);
      return true;
    }

    onToolCall(d) {
      if (d.name === "plan") return; // the plan it shows is its output
      if (this.planTask(d.id, d.name, "in_progress")) return;
      const box = el("details", { class: "tool", "data-call": d.id },
        this.toolSummary(d.name),
        el("pre", { class: "args", text: pretty(d.args) }));
      this.show(box);
    }

    onToolResponse(d) {
      if (d.name === "plan" && !d.is_error) return;
      if (d.name !== "plan" && this.planTask(d.tool_call_id, d.name, d.is_error ? "failed" : "done")) return;
      let box = this.log.querySelector(`.tool[data-call="${CSS.escape(d.tool_call_id || "")}"]`);
      if (!box) {
        box = el("details", { class: "tool", "data-call": d.tool_call_id }, this.toolSummary(d.name));
        this.show(box);
      }
      const preview = d.content_preview || "";
      box.append(el("pre", { class: "result", text: d.is_error ? this.t("toolError", { text: preview }) : "→ " + preview }));
      if (d.is_error) box.classList.add("error");
      box.querySelector("summary").replaceWith(this.toolSummary(d.name, d.is_error ? "failed" : "done"));
    }

    onConfirmationRequest(d) {
      const canApprove = this.myRole === "owner" || this.myRole === "approver";
      const tool = d.tool_name;
      const approve = el("button", { type: "button", "data-approve": true, text: this.t("approve"), onclick: () => this.answer(d.confirmation_id, true, box) });
      const deny = el("button", { type: "button", "data-deny": true, text: this.t("deny"), onclick: () => this.answer(d.confirmation_id, false, box) });
      const always = el("button", { type: "button", "data-always": true, title: this.t("alwaysAllowTitle", { tool }), text: this.t("alwaysAllow"), onclick: () => this.answer(d.confirmation_id, true, box, "session") });
      const box = el("div", { class: "confirm", role: "group", "aria-label": this.t("approvalFor", { tool }), "data-confirmation": d.confirmation_id },
        el("p", { text: this.t("allowTool", { tool }) }),
        el("pre", { text: pretty(d.args) }),
        d.security_warning ? el("p", { class: "warning" }, icon("warning"), " " + d.security_warning) : null,
        canApprove ? el("div", { class: "actions" }, approve, always, deny) : el("p", { class: "resolution", text: this.t("waitingForApprover") }));
      this.show(box);
    }

    answer(id, approved, box, scope) {
      const frame = { type: "confirm", confirmation_id: id, approved };
      if (scope) frame.scope = scope;
      if (this.send(frame)) {
        box.querySelectorAll("button").forEach((b) => { b.disabled = true; });
      } else {
        this.notice(this.t("notConnected"));
      }
    }

    onConfirmationResolved(d) {
      const box = this.log.querySelector(`.confirm[data-confirmation="${CSS.escape(d.confirmation_id || "")}"]`);
      if (!box) return;
      // Decided, here or in another place: the buttons go, and a line
      // says who decided and from where.
      box.querySelectorAll(".actions, .resolution").forEach((r) => r.remove());
      // Why it closed is in reason, never in by: a person may be called
      // "Expired". An event stored before reason existed said it in by,
      // with no channel (a person's answer always has one).
      const legacy = !d.reason && !d.channel && !d.approved && (d.by === "expired" || d.by === "cancelled");
      const why = d.reason || (legacy ? d.by : "");
      let text;
      if (why === "expired") text = this.t("expired");
      else if (why === "cancelled") text = d.reason && d.by ? this.t("cancelledBy", { by: d.by }) : this.t("cancelled");
      else {
        text = this.t(d.approved ? "approvedBy" : "deniedBy", { by: d.by }) + (d.channel ? " · " + this.channelName(d.channel) : "") +
          (d.scope === "session" ? " · " + this.t("forThisSession") : "");
      }
      box.append(el("p", { class: "resolution", role: "status", text }));
    }

    onMembers(d) {
      const members = d.members || [];
      const mine = members.some((m) => this.isMe(m));
      if (this.listed && !mine) return this.leftConversation();
      this.showPeople(members);
    }

    isMe(m) { return m.channel === "web" && m.id === this.me; }

    // showPeople lists the people of a shared conversation in the header:
    // a badge each with a dot for those here now, who they are in its
    // label. A conversation of one shows nothing.
    showPeople(members) {
      this.listed = members.some((m) => this.isMe(m));
      const shown = members.length >= 2 ? members : [];
      const max = 5;
      this.people.replaceChildren(...shown.slice(0, max).map((m) => {
        const label = this.memberLabel(m, this.isMe(m));
        return el("li", { title: label, "data-here": String(Boolean(m.here)) },
          el("span", { class: "avatar", "aria-hidden": "true", text: initials(m.name) }),
          m.here ? el("span", { class: "here", "aria-hidden": "true" }) : null,
          el("span", { class: "sr-only", text: label }));
      }));
      if (shown.length > max) {
        const rest = shown.slice(max).map((m) => this.memberLabel(m, this.isMe(m)));
        this.people.append(el("li", { title: rest.join("\n") },
          el("span", { class: "avatar", "aria-hidden": "true", text: "+" + rest.length }),
          el("span", { class: "sr-only", text: this.t("andOthers", { names: rest.join("; ") }) })));
      }
      this.people.hidden = shown.length === 0;
    }

    // leftConversation: we are no longer among its people (our /leave).
    // The page forgets it, so a reload does not come back to it.
    leftConversation() {
      this.listed = false;
      this.session = "";
      this.save();
      this.stopped = true;
      this.wanted = false;
      if (this.ws) this.ws.close(1000);
      this.people.hidden = true;
      this.shareButton.hidden = true;
      this.setWritable(false);
      this.setPlaceholder("left");
      this.setStatus("");
      this.notice(this.t("left"));
    }

    // share asks for an invite code; the answer (an info notice with its
    // link) is shown by showLink.
    share() {
      if (!this.attached || !this.send({ type: "input", id: newID(), text: "/share" })) {
        this.notice(this.t("notConnected"));
      }
    }

    // showLink shows an invite link as selectable text and copies it to
    // the clipboard; where the browser refuses that, the text is selected
    // for the person to copy themselves.
    showLink(link) {
      const status = el("p", { class: "share-status", role: "status", text: this.t("copyingLink") });
      const field = el("input", { type: "text", readonly: true, value: link, "aria-label": this.t("inviteLink"), onfocus: (e) => e.target.select() });
      const hide = el("button", { class: "hide", type: "button", "aria-label": this.t("hideInviteLink"), text: "×", onclick: () => { this.linkBox.hidden = true; } });
      this.linkBox.replaceChildren(status, hide, field);
      this.linkBox.hidden = false;
      const refused = () => {
        status.textContent = this.t("copyLink");
        field.focus();
        field.select();
      };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(link).then(() => { status.textContent = this.t("linkCopied"); }, refused);
      } else {
        refused();
      }
    }

    onUI(d) {
      const card = el("div", { class: "card", "data-ui": d.id, role: "group", "aria-label": d.title || this.t("card") });
      const done = (chosen) => {
        card.querySelectorAll("button, select, input, textarea").forEach((c) => { c.disabled = true; });
        if (chosen) chosen.classList.add("chosen");
      };
      const act = (actionID, value, chosen) => {
        if (this.send({ type: "action", action_id: actionID, value })) done(chosen);
        else this.notice(this.t("notConnected"));
      };
      if (d.title) card.append(el("h3", { text: d.title }));
      if (d.text_html !== undefined) {
        const t = el("div", { class: "text" });
        t.innerHTML = d.text_html; // rendered and sanitised by the gateway
        card.append(t);
      } else if (d.text) {
        card.append(el("p", { class: "text", text: d.text }));
      }
      if (d.fields && d.fields.length) {
        const dl = el("dl");
        for (const f of d.fields) dl.append(el("dt", { text: f.label }), el("dd", { text: f.value }));
        card.append(dl);
      }
      const image = cardImage(d.image, d.image_allowed);
      if (image) card.append(image);
      if (d.buttons && d.buttons.length) {
        const row = el("div", { class: "actions" });
        for (const b of d.buttons) {
          const btn = el("button", {
            type: "button", class: b.style === "primary" || b.style === "danger" ? b.style : undefined, text: b.label,
            onclick: () => act(b.action_id, b.value || b.label, btn),
          });
          row.append(btn);
        }
        card.append(row);
      }
      if (d.select) {
        const s = d.select;
        const sel = el("select", { "aria-label": s.placeholder || this.t("choose") },
          el("option", { value: "", text: s.placeholder || this.t("choosePlaceholder"), disabled: true, selected: true }));
        for (const o of s.options || []) sel.append(el("option", { value: o.value, text: o.label }));
        sel.addEventListener("change", () => { if (sel.value) act(s.action_id, sel.value, null); });
        card.append(sel);
      }
      if (d.form) {
        const f = d.form;
        const form = el("form");
        for (const inp of f.inputs || []) {
          const id = "f-" + newID();
          const attrs = { id, name: inp.name, placeholder: inp.placeholder, required: Boolean(inp.required) };
          const field = inp.type === "textarea"
            ? el("textarea", Object.assign(attrs, { rows: "3" }))
            : el("input", Object.assign(attrs, { type: ["number", "email"].includes(inp.type) ? inp.type : "text" }));
          form.append(el("label", { for: id, text: inp.label || inp.name }), field);
        }
        const submit = el("button", { type: "submit", class: "primary", text: f.submit_label || this.t("submit") });
        form.append(submit);
        form.addEventListener("submit", (e) => {
          e.preventDefault();
          const value = {};
          for (const [k, v] of new FormData(form).entries()) value[k] = String(v);
          act(f.action_id, value, submit);
        });
        card.append(form);
      }
      this.show(card);
    }

    onState(d) {
      if (d.state === "idle") this.plan = null; // the turn's plan is complete as shown
      const key = STATE_TEXT[d.state];
      this.setStatus(key ? this.t(key, { tool: d.tool || this.t("aTool") }) : "");
    }

    // --- input ---

    sendInput() {
      const text = this.input.value.trim();
      if (this.input.disabled) return;
      // Files go with a message; a command leaves them for the next one.
      const files = text.startsWith("/") ? [] : this.staged;
      if (!text && !files.length) return;
      this.input.value = "";
      if (files.length) {
        this.staged = [];
        this.showTray();
      }
      this.sendText(text, files);
    }

    // sendText sends text as the user's message (typed, or a suggestion
    // clicked). Until the session echoes it, it is pending: shown at once,
    // greyed, "sending…"; sent when connected, and again after every
    // reconnect with the same id (the gateway answers a repeated id once).
    sendText(text, files) {
      this.clearWelcome();
      files = files || [];
      const p = { id: newID(), text, sent: false, command: text.startsWith("/"), files };
      p.bubble = el("div", { class: "msg", "data-role": "user", "data-mine": "true", "data-pending": "sending" },
        el("div", { class: "body", text }),
        files.length ? this.fileList(files, true) : null,
        el("span", { class: "sending", text: this.t("sending") }));
      this.pending.push(p);
      if (this.sendPending(p)) {
        if (!p.command) this.show(p.bubble);
        return;
      }
      this.show(p.bubble);
      this.setStatus(this.t("queued"));
      if (!this.ws && !this.stopped) this.connect();
    }

    // --- rendering helpers ---

    show(node) {
      this.log.append(node);
      this.scrollDown();
    }

    notice(text) {
      this.show(el("div", { class: "notice", role: "alert", text }));
    }

    setStatus(text) {
      this.stateLine.textContent = text;
    }

    scrollDown() {
      this.log.scrollTop = this.log.scrollHeight;
    }
  }

  customElements.define("switchboard-chat", SwitchboardChat);

  // The script tag's data-* attributes configure the element it adds.
  if (script && !script.hasAttribute("data-manual")) {
    const chat = document.createElement("switchboard-chat");
    for (const a of ["guide", "title", "server", "token", "user-name", "invite", "theme", "strings"]) {
      const v = script.getAttribute("data-" + a);
      if (v) chat.setAttribute(a, v);
    }
    if (script.hasAttribute("data-open")) chat.setAttribute("open", "");
    const add = () => document.body.append(chat);
    if (document.body) add();
    else document.addEventListener("DOMContentLoaded", add);
  }
})();
