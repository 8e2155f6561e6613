/* Which page this is (the shell says), and drawing it. */
"use strict";
(function (R) {
  R.pages.error = function () {
    R.where(String(R.page.status));
    R.mount(R.el("h1", {}, "Not available"), R.el("p", {class: "error", id: "failure"}, R.page.message),
      R.link("/", "All runs"));
  };
  if (R.shared) document.getElementById("home").removeAttribute("href");
  var draw = R.pages[R.page.page];
  if (draw) draw(R.page.ids || []);
  else R.fail(new Error("unknown page " + R.page.page));
})(Rewind);
