"""A pipeline on the real page in headless Chromium: a preset opens on its Schedule, whose grid says the bubble the
run's own spans give, and every view of its own draws."""
from __future__ import annotations

import pytest

from test_browser import ACTIVE_PANEL, IDLE, SVG, assert_no_exception, screenshot_full_page, show_tab

pytestmark = pytest.mark.browser


def test_a_pipeline_preset_opens_on_its_schedule_and_every_view_draws(page, artifacts):
    page.goto("/?preset=pipeline-bubble")  # GPipe, 4 stages, 4 microbatches: (S - 1) / (M + S - 1) = 3 / 7
    page.wait_for_selector(IDLE, timeout=180_000)
    page.wait_for_selector(f"{ACTIVE_PANEL} {SVG}", timeout=180_000)
    assert_no_exception(page)
    tabs = page.get_by_role("tab").all_inner_texts()
    assert tabs[:2] == ["Schedule", "One step"] and {"Step through", "Memory", "GPipe and 1F1B", "Timeline"} <= set(tabs)
    selected = page.locator("[role=tab][aria-selected=true]").inner_text()
    assert selected == "Schedule"
    panel = page.locator(ACTIVE_PANEL)
    title = panel.locator(".gtitle").first.text_content()
    assert "43%" in title and title.startswith("Step ") and "replayed" in title  # 3 / 7, the textbook's, beside the replay
    assert {f"stage {s}" for s in range(1, 5)} <= set(panel.locator(".ytick text").all_text_contents())
    screenshot_full_page(page, artifacts / "pipeline-schedule.png")
    for name, words in (("Step through", "Slot 1 of"), ("Memory", "microbatches' activations"),
                        ("GPipe and 1F1B", "GPipe and 1F1B at these settings")):
        shown = show_tab(page, name)
        page.wait_for_selector(IDLE)
        shown.locator(SVG).first.wait_for()
        assert words in shown.locator(".gtitle").first.text_content(), name
        assert_no_exception(page)
    screenshot_full_page(page, artifacts / "pipeline-schedules.png")


def test_a_bare_pipeline_link_opens_on_its_lesson_the_schedule(page):
    page.goto("/?engine=pipeline")
    page.wait_for_selector(IDLE, timeout=180_000)
    page.wait_for_selector(f"{ACTIVE_PANEL} {SVG}", timeout=180_000)
    assert_no_exception(page)
    assert page.locator("[role=tab][aria-selected=true]").inner_text() == "Schedule"
    assert "bubble" in page.locator(ACTIVE_PANEL).locator(".gtitle").first.text_content()
