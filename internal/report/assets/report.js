// Tooltips: the <title> of a bar or marker becomes an instant tooltip that
// follows the pointer. Without script, browsers show the <title> anyway.
(function () {
  "use strict";
  var tip = document.getElementById("tooltip");
  if (!tip) {
    return;
  }
  var items = document.querySelectorAll("svg.chart rect > title, svg.chart line > title");
  Array.prototype.forEach.call(items, function (t) {
    var el = t.parentNode;
    el.setAttribute("data-tip", t.textContent);
    el.classList.add("has-tip");
    el.removeChild(t);
  });
  function place(e) {
    var x = e.clientX + 14, y = e.clientY + 14;
    var r = tip.getBoundingClientRect();
    if (x + r.width > window.innerWidth - 8) {
      x = e.clientX - r.width - 14;
    }
    if (y + r.height > window.innerHeight - 8) {
      y = e.clientY - r.height - 14;
    }
    tip.style.left = Math.max(4, x) + "px";
    tip.style.top = Math.max(4, y) + "px";
  }
  document.addEventListener("mouseover", function (e) {
    var el = e.target.closest ? e.target.closest("[data-tip]") : null;
    if (!el) {
      tip.hidden = true;
      return;
    }
    tip.textContent = el.getAttribute("data-tip");
    tip.hidden = false;
    place(e);
  });
  document.addEventListener("mousemove", function (e) {
    if (!tip.hidden) {
      place(e);
    }
  });
})();
