// vq console: progressive enhancement only; every page works without scripts.
// With scripts on, destructive forms confirm through hx-confirm dialogs, so the no-JS
// confirmation checkboxes (.nojs-confirm) are hidden by the "js" class.
document.documentElement.classList.add("js");
