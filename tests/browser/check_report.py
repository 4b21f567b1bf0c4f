#!/usr/bin/env python3
"""Loads a `neardup report` page in headless Chromium and says what the browser saw.

Usage: check_report.py REPORT_HTML SCREENSHOT_PNG

Prints one JSON object on stdout:
  title        the document's title
  sections     the id of every <section>, in order
  svgs         [width, height] of every <svg> (getBoundingClientRect)
  severe_logs  messages of the browser's log entries at level SEVERE (a CSP violation, a
               failed load or a script error would be one)
  resources    names of performance.getEntriesByType('resource'): what the page fetched
  page_height  document.body.scrollHeight
and saves a full-page screenshot (window 1200 wide, as tall as the page up to 6000 pixels).

It asserts nothing beyond the page loading: the Rust test (tests/it/report.rs) judges the
JSON. Exit code 0 when it got that far, nonzero with a message on stderr otherwise.

Environment: CHROMIUM (default /usr/bin/chromium), CHROMEDRIVER (default /usr/bin/chromedriver).
"""

import json
import os
import pathlib
import sys
import time


def fail(message, code):
    print(f"check_report.py: {message}", file=sys.stderr)
    sys.exit(code)


def main():
    if len(sys.argv) != 3:
        fail("usage: check_report.py REPORT_HTML SCREENSHOT_PNG", 2)
    report = pathlib.Path(sys.argv[1])
    screenshot = pathlib.Path(sys.argv[2])
    if not report.is_file():
        fail(f"{report}: no such file", 2)
    url = report.resolve().as_uri()

    try:
        from selenium import webdriver
    except ImportError as e:
        fail(f"selenium is not installed ({e}); pip install selenium", 3)

    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Chromium now and then exits at start while the other tests load the machine ("Chrome
    # instance exited", seen once in CI): a start is tried three times before the test fails.
    driver = None
    for attempt in range(3):
        service = webdriver.ChromeService(
            executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
        )
        try:
            driver = webdriver.Chrome(service=service, options=options)
            break
        except Exception as e:  # noqa: BLE001 - any failure to start is reported the same way
            if attempt == 2:
                fail(f"Chromium did not start in three tries: {e}", 4)
            time.sleep(2)

    try:
        try:
            driver.set_page_load_timeout(60)
            driver.get(url)
            deadline = time.monotonic() + 30
            while driver.execute_script("return document.readyState") != "complete":
                if time.monotonic() > deadline:
                    raise TimeoutError("the page did not finish loading in 30 s")
                time.sleep(0.1)
        except Exception as e:  # noqa: BLE001
            fail(f"{url} did not load: {e}", 5)

        title = driver.title
        sections = driver.execute_script(
            "return Array.from(document.querySelectorAll('section')).map(s => s.id);"
        )
        svgs = driver.execute_script(
            "return Array.from(document.querySelectorAll('svg')).map(s => {"
            " const r = s.getBoundingClientRect(); return [r.width, r.height]; });"
        )
        resources = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name);"
        )
        page_height = int(driver.execute_script("return document.body.scrollHeight;"))
        severe_logs = [
            entry.get("message", "")
            for entry in driver.get_log("browser")
            if entry.get("level") == "SEVERE"
        ]

        driver.set_window_size(1200, max(1, min(page_height, 6000)))
        time.sleep(0.3)
        if not driver.save_screenshot(str(screenshot)):
            fail(f"the screenshot could not be written to {screenshot}", 6)

        print(
            json.dumps(
                {
                    "title": title,
                    "sections": sections,
                    "svgs": svgs,
                    "severe_logs": severe_logs,
                    "resources": resources,
                    "page_height": page_height,
                }
            )
        )
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
