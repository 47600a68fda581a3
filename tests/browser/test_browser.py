"""The real page in headless Chromium: what only a browser shows (drawn charts, links, animation).

    .venv/bin/python -m pytest tests -m browser -q

One `streamlit run app.py` and one Chromium serve every test (see conftest.py); each test opens the page
in a fresh browser context, i.e. a new Streamlit session. Screenshots go to test-artifacts/.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import urlencode, urlparse

import pytest

import waits
from waits import ACTIVE_PANEL, IDLE

pytestmark = pytest.mark.browser

# The tabs the page must have; any others it grows are drawn and checked too.
TABS = ["One step", "Flow", "Split", "Timeline", "Sample map", "Step through", "Inputs", "Memory", "Tutorial log"]
CHART_TABS = TABS[:-1]
SVG = "[data-testid=stPlotlyChart] .main-svg"
IN_MODEL = re.compile(r"In Model: input size torch\.Size\(\[(\d+),\s\d+\]\)")  # \s: the page holds a shape on one line (a no-break space)


def open_page(page, query: str = "") -> None:
    """Open the app (optionally with a query string) and wait until its script has run and its charts are drawn
    (the page's context made by waits.watched, as the page fixture's is)."""
    waits.opened(page, f"/{query}")
    page.wait_for_selector(f"{ACTIVE_PANEL} {SVG}, [data-testid=stException]")


def show_tab(page, name: str):
    """Click a tab and return its panel once visible."""
    page.get_by_role("tab", name=name, exact=True).click()
    panel = page.locator(ACTIVE_PANEL)
    page.wait_for_function(
        "name => document.querySelector('[data-testid=stTab][aria-selected=true]')?.innerText.trim() === name", arg=name
    )
    return panel


def assert_no_exception(page) -> None:
    boxes = page.locator("[data-testid=stException]")
    assert boxes.count() == 0, f"Streamlit shows an exception: {boxes.first.inner_text()[:2000]}"


def tutorial_log(page) -> str:
    panel = show_tab(page, "Tutorial log")
    code = panel.locator("[data-testid=stCode]")
    code.wait_for()
    return code.inner_text()


def split_rows(log: str) -> list[list[int]]:
    """Rows per replica per batch (largest first), read back from the tutorial log as the page shows it."""
    batches, current = [], []
    for line in log.splitlines():
        match = IN_MODEL.search(line)
        if match:
            current.append(int(match.group(1)))
        elif line.startswith("Outside"):
            batches.append(sorted(current, reverse=True))
            current = []
    return batches


def chart_traces(page, key: str) -> list[dict]:
    """Each trace of the chart with widget key `key` as plotly.js holds it: name, type, size and values."""
    return page.locator(f".st-key-{key} .js-plotly-plot").evaluate(
        "el => el.data.map(t => ({name: t.name ?? null, type: t.type ?? 'scatter',"
        " points: (t.x ?? t.y ?? t.z ?? []).length, x: t.x ?? null, y: t.y ?? null, z: t.z ?? null}))"
    )


def legend(page, key: str) -> list[str]:
    """The legend entries the chart with widget key `key` shows."""
    return page.locator(f".st-key-{key} .legendtext").evaluate_all("els => els.map(e => e.textContent)")


def device_count(page) -> str:
    """The devices' sentence (under the chart; a preset's line above the tabs is another box)."""
    return page.locator("[data-testid=stAlertContentInfo]").filter(has_not_text="Pitfall:").first.inner_text()


def screenshot_full_page(page, path) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside stMain, so grow the viewport to fit it first."""
    height = page.evaluate(
        "() => Math.max(...['[data-testid=stMain]', '[data-testid=stSidebarContent]', 'body']"
        ".map(s => document.querySelector(s)?.scrollHeight ?? 0))"
    )
    waits.resized(page, page.viewport_size["width"], max(height, 900))
    page.screenshot(path=str(path), full_page=True)


def tab_names(page) -> list[str]:
    return [t.strip() for t in page.get_by_role("tab").all_inner_texts()]


def draw_tab(page, name: str):
    """Show a tab and wait until every plotly chart in it has drawn its SVG; returns the panel."""
    panel = show_tab(page, name)
    if name in CHART_TABS:
        panel.locator(SVG).first.wait_for()
    panel.locator("[data-testid=stElementContainer]").first.wait_for()
    charts = panel.locator("[data-testid=stPlotlyChart]")
    for i in range(charts.count()):
        charts.nth(i).locator(".main-svg").first.wait_for()
    return panel


def test_every_view_draws_without_exception(page, artifacts):
    open_page(page)
    assert_no_exception(page)
    names = tab_names(page)
    assert set(TABS) <= set(names), f"tabs shown: {names}"
    for name in names:
        panel = draw_tab(page, name)
        if name != "Tutorial log":
            panel.screenshot(path=str(artifacts / f"default-tab-{name.lower().replace(' ', '-')}.png"))
    assert "Outside: input size" in tutorial_log(page)
    assert_no_exception(page)


def test_eight_gpus_on_the_slider_change_the_split(page):
    open_page(page)
    assert split_rows(tutorial_log(page)) == [[15, 15]] * 3 + [[5, 5]]
    show_tab(page, "Split").locator(SVG).first.wait_for()
    before = chart_traces(page, "split")
    assert "GPU 1" in legend(page, "split") and "GPU 7" not in legend(page, "split")

    slider = page.get_by_role("slider", name="Number of GPUs")
    slider.focus()
    for _ in range(6):  # 2 -> 8, as a keyboard user would
        slider.press("ArrowRight")
    page.wait_for_function("() => document.querySelector('.st-key-gpus input[type=range]').value === '8'")
    show_tab(page, "Tutorial log")  # only the shown tab's view is built
    page.wait_for_function("() => /Let's use 8 GPUs!/.test(document.querySelector('[data-testid=stCode]')?.innerText)")
    page.wait_for_selector(IDLE)

    assert split_rows(tutorial_log(page)) == [[4] * 7 + [2]] * 3 + [[2] * 5]
    assert simulated_devices(8) in device_count(page)
    assert "gpus=8" in page.url
    show_tab(page, "Split").locator(SVG).first.wait_for()
    after = chart_traces(page, "split")
    assert after != before, "the split chart did not change with the GPU count"
    assert {f"GPU {i}" for i in range(8)} <= set(legend(page, "split"))
    assert_no_exception(page)


def simulated_devices(gpus: int) -> str:
    """How the device sentence counts `gpus` simulated devices on this machine: a thread each, or the replicas
    taking turns on one thread per core where the devices outnumber the cores (the server runs here too)."""
    from dpviz.engines.dp.workers import cores

    threads = min(gpus, cores())
    return f"{gpus} CPU threads stand in" if threads == gpus else f"took turns on {threads} CPU thread"


def test_a_link_opens_the_page_in_its_configuration(page):
    open_page(page, "?gpus=3&batch_size=10&data_size=25")
    assert_no_exception(page)
    assert page.locator("[data-testid=stAlertContentWarning]").count() == 0
    assert page.get_by_role("slider", name="Number of GPUs").input_value() == "3"
    assert page.get_by_label("Batch size", exact=True).input_value() == "10"
    assert page.get_by_label("Data size", exact=True).input_value() == "25"
    assert simulated_devices(3) in device_count(page)
    assert split_rows(tutorial_log(page)) == [[4, 4, 2], [4, 4, 2], [2, 2, 1]]


def test_play_steps_through_the_batches(page):
    open_page(page)
    panel = show_tab(page, "Step through")
    panel.locator(SVG).first.wait_for()
    chart = panel.locator(".js-plotly-plot")
    state = "el => [el.querySelector('.slider-currentvalue')?.textContent, " \
            "el.querySelector('.slider-grip')?.getAttribute('transform'), " \
            "el._fullLayout?.sliders?.[0]?.active]"
    first = chart.evaluate(state)
    buttons = chart.locator(".updatemenu-button")
    assert buttons.count() >= 1, "the Step through chart has no play button"
    play = buttons.filter(has_text=re.compile(r"play|▶", re.I))
    (play.first if play.count() else buttons.first).click()
    chart.evaluate(
        f"(el, first) => new Promise((resolve, reject) => {{ const t0 = Date.now(); const tick = () => {{"
        f" const now = ({state})(el); if (JSON.stringify(now) !== JSON.stringify(first)) resolve(now);"
        f" else if (Date.now() - t0 > 15000) reject(new Error('no step after play: ' + JSON.stringify(now)));"
        f" else setTimeout(tick, 50); }}; tick(); }})",
        first,
    )
    assert_no_exception(page)


def test_a_bad_link_warns_and_the_page_still_works(page):
    open_page(page, "?gpus=lots")
    warning = page.locator("[data-testid=stAlertContentWarning]")
    warning.first.wait_for()
    assert "gpus must be a whole number" in " ".join(warning.all_inner_texts())
    assert page.get_by_role("slider", name="Number of GPUs").input_value() == "2"  # the default stands in
    assert page.locator(f"{ACTIVE_PANEL} {SVG}").count() > 0
    assert_no_exception(page)


def test_screenshots_of_the_default_page_and_an_eight_gpu_link(page, artifacts):
    open_page(page)
    assert_no_exception(page)
    screenshot_full_page(page, artifacts / "default-page.png")
    page.set_viewport_size({"width": 1400, "height": 900})
    open_page(page, "?gpus=8")
    assert_no_exception(page)
    assert simulated_devices(8) in device_count(page)
    for name in tab_names(page):
        if name != "Tutorial log":
            panel = draw_tab(page, name)
            panel.screenshot(path=str(artifacts / f"gpus8-tab-{name.lower().replace(' ', '-')}.png"))
    show_tab(page, "Flow")
    screenshot_full_page(page, artifacts / "gpus8-page.png")
    assert (artifacts / "default-page.png").stat().st_size > 10_000
    assert (artifacts / "gpus8-page.png").stat().st_size > 10_000


def test_a_pitfall_button_runs_the_preset_and_shows_the_error_as_python_raises_it(page, artifacts):
    open_page(page)
    page.get_by_role("button", name="A keyword argument with a batch smaller than the GPUs").click()
    page.wait_for_function("() => location.search.includes('inputs=kwargs') && location.search.includes('gpus=8')")
    page.wait_for_selector(IDLE)
    error = page.locator("[data-testid=stAlertContentError]")
    error.first.wait_for()
    text = error.first.inner_text()
    assert "Caught TypeError in replica 5 on device 5." in text and "missing 1 required positional argument" in text
    assert_no_exception(page)
    draw_tab(page, "Inputs")
    page.get_by_role("radio", name=re.compile("batch 4 of 4")).check(force=True)  # the failing batch
    page.wait_for_selector(IDLE)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.st-key-inputs_chart .js-plotly-plot')]"
        ".some(el => (el.data || []).some(d => JSON.stringify(d.text).includes('missing')))")
    # The failing batch's chart (while the page swaps charts, the one it replaces may still be there): x is
    # missing on GPUs 5-7 (5 marked as the replica that raised), on the argument rows x and scale=.
    chart = page.locator(".st-key-inputs_chart .js-plotly-plot").evaluate_all(
        "els => els.filter(e => (e.data || []).some(d => JSON.stringify(d.text).includes('missing')))"
        ".map(e => ({missing: e.data.find(d => JSON.stringify(d.text).includes('missing')).x,"
        " rows: e.layout.yaxis.ticktext}))[0]")
    assert chart["missing"] == ["5 ✗", "6", "7"] and chart["rows"] == ["x", "scale="]
    screenshot_full_page(page, artifacts / "preset-kwargs-small-batch.png")


@pytest.mark.parametrize("name", ["batchnorm-one-row", "scalar-loss", "rnn-hidden-dim", "state-lost"])
def test_each_preset_link_draws_its_views(page, artifacts, name):
    from dpviz.presets import PRESETS

    open_page(page, f"?preset={name}")
    assert_no_exception(page)
    info = " ".join(page.locator("[data-testid=stAlertContentInfo]").all_inner_texts())
    assert f"Pitfall: {PRESETS[name].title}" in info
    for tab in ("Flow", "Inputs"):
        draw_tab(page, tab)
    show_tab(page, "Flow")
    screenshot_full_page(page, artifacts / f"preset-{name}.png")
    assert_no_exception(page)


# Anything a link or a file could turn into a request, a link or an image, in HTML or in plotly's SVG.
FOREIGN = ('a[href*="evil.example"], [*|href*="evil.example"], img[src*="evil.example"], '
           '[src*="evil.example"], [style*="evil.example"]')


def test_markup_in_a_link_and_in_an_uploaded_trace_shows_as_text(page, artifacts, tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the trace file with markup in it
    from user_text_traces import EVIL, LINK, payload_json

    requests = []
    page.on("request", lambda request: requests.append(request.url))
    sign_in = f"[Session expired - sign in again](https://{EVIL}/login)"
    query = {"gpus": sign_in, "model": f"![x](http://{EVIL}/x.png)", "preset": LINK, f"<img src=http://{EVIL}/p.png>": "1"}
    open_page(page, "?" + urlencode(query))
    warnings = page.locator("[data-testid=stAlertContentWarning]")
    warnings.first.wait_for()
    shown = " ".join(warnings.all_inner_texts()).replace("\u2060", "")
    assert sign_in in shown and f"'<img src=http://{EVIL}/p.png>'" in shown and f"'![x](http://{EVIL}/x.png)'" in shown

    trace_file = tmp_path / "run.json"
    trace_file.write_text(payload_json())
    page.locator("[data-testid=stFileUploaderDropzoneInput]").set_input_files(str(trace_file))
    page.get_by_text("Showing an uploaded trace").wait_for()
    page.wait_for_selector(IDLE)
    for tab in ("Flow", "Timeline", "Inputs"):  # Inputs last: only the shown tab's chart is on the page
        draw_tab(page, tab)
    assert_no_exception(page)
    # the devices' sentence: in the pitfall's box when the file's settings are a preset's, else a box of its own
    devices = page.locator("[data-testid=stAlertContentInfo], [data-testid=stAlertContentSuccess]").filter(
        has_text="Real GPUs").first.inner_text().replace("\u2060", "")
    assert f'cuda:0 <a href="http://{EVIL}/x">' in devices  # the device names, as the file wrote them
    error = page.locator("[data-testid=stAlertContentError]").first.inner_text()
    assert f"<img src=http://{EVIL}/i.png>" in error and f"[link](http://{EVIL})" in error
    labels = page.locator(".st-key-inputs_chart .ytick text").all_text_contents()
    assert any("<b>bold-evil" in label for label in labels), labels  # drawn as text, tags and all
    show_tab(page, "Flow")
    screenshot_full_page(page, artifacts / "user-text-page.png")

    assert page.locator(FOREIGN).count() == 0, page.locator(FOREIGN).first.evaluate("e => e.outerHTML")
    assert not [url for url in requests if EVIL in (urlparse(url).hostname or "")]  # the link itself names it
