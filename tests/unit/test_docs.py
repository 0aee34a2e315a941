"""The README and the documentation agree with what they describe.

README.rst gives the one command that runs the tests, and ``.ci/run``
runs exactly that line; its ``nova.conf`` lines are those of the 15-22
sample; its links point at pages that exist; every invariant and hazard
label the code cites (I1, H5, ...) is defined in the contributor guide's
protocol page; the configuration reference shows the namespaces the
sample is generated from.
"""

import configparser
import os
import re

from tests import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
README = os.path.join(ROOT, "README.rst")
PROTOCOL = os.path.join(ROOT, "doc", "source", "contributor", "protocol.rst")
CODE_DIRS = ("grant_scheduler", "grant_scheduler_bench", "tests", "tools")
LABEL = re.compile(r"\b([HI][1-9][0-9]?)\b")


def read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def section(text, title):
    """The body of the README section ``title`` (up to the next one)."""
    lines = text.splitlines()
    start = lines.index(title) + 2
    for i in range(start, len(lines) - 1):
        if lines[i + 1].startswith("===") and lines[i].strip():
            return "\n".join(lines[start:i])
    return "\n".join(lines[start:])


def literal_blocks(text):
    """Every ``::`` literal block of ``text``, dedented."""
    blocks = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        block = []
        for following in lines[i + 1 :]:
            if following.strip() and not following.startswith(" "):
                break
            block.append(following)
        body = "\n".join(block).strip("\n")
        blocks.append("\n".join(b[4:] for b in body.splitlines()))
    return blocks


class TestReadme(base.TestCase):
    def test_ci_runs_the_readme_test_command(self):
        fresh = section(read("README.rst"), "On a fresh machine")
        commands = [b for b in literal_blocks(fresh) if "python3 -m tox" in b]
        self.assertEqual(1, len(commands), commands)
        ci = [
            line
            for line in read(".ci", "run").splitlines()
            if line.strip() and not line.startswith(("#", "set ", "cd "))
        ]
        self.assertEqual([commands[0]], ci)

    def test_the_main_job_runs_the_real_placement_service(self):
        fresh = section(read("README.rst"), "On a fresh machine")
        [main] = [b for b in literal_blocks(fresh) if "_bench" in b]
        self.assertIn("'.[bench,placement]'", main)
        setup = configparser.ConfigParser(interpolation=None)
        setup.read_string(read("setup.cfg"))
        self.assertIn("openstack-placement", setup.get("extras", "placement"))

    def test_nova_conf_lines_are_the_sample_s(self):
        block = literal_blocks(section(read("README.rst"), "In nova.conf"))[0]
        readme = configparser.ConfigParser(interpolation=None)
        readme.read_string(block)
        sample = configparser.ConfigParser(interpolation=None, strict=False)
        sample.read_string(read("etc", "nova", "nova.conf.15-22.sample"))
        self.assertEqual(
            ["scheduler", "grant_scheduler_database"], readme.sections()
        )
        for group in readme.sections():
            for key, value in readme.items(group):
                self.assertEqual(
                    sample.get(group, key), value, "[%s] %s" % (group, key)
                )
        self.assertEqual("grant_scheduler", readme.get("scheduler", "driver"))

    def test_links_point_at_files(self):
        targets = re.findall(r"<([^<>\s]+)>`__?", read("README.rst"))
        self.assertGreater(len(targets), 10)
        for target in targets:
            self.assertTrue(os.path.exists(os.path.join(ROOT, target)), target)


class TestContributorGuide(base.TestCase):
    def cited_labels(self):
        cited = {}
        for top in CODE_DIRS:
            for dirpath, _dirs, files in os.walk(os.path.join(ROOT, top)):
                for name in files:
                    if not name.endswith((".py", ".sh")):
                        continue
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        for label in LABEL.findall(f.read()):
                            cited.setdefault(label, path)
        return cited

    def test_every_cited_label_is_defined(self):
        with open(PROTOCOL, encoding="utf-8") as f:
            defined = set(
                re.findall(r"^([HI][1-9][0-9]?)\b", f.read(), re.MULTILINE)
            )
        cited = self.cited_labels()
        # The code cites every invariant and hazard the page defines.
        self.assertEqual(
            {"I%d" % n for n in range(1, 5)}
            | {"H%d" % n for n in range(1, 13)},
            defined,
        )
        for label, path in sorted(cited.items()):
            self.assertIn(label, defined, "%s cites %s" % (path, label))

    def test_configuration_reference_shows_the_sample_s_namespaces(self):
        generator = re.findall(
            r"^namespace = (\S+)$",
            read("etc", "grant-scheduler-config-generator.conf"),
            re.MULTILINE,
        )
        page = read("doc", "source", "admin", "configuration.rst")
        directive = page.split(".. show-options::", 1)[1]
        shown = []
        for line in directive.splitlines()[1:]:
            if line.strip():
                if not line.startswith("   "):
                    break
                shown.append(line.strip())
        self.assertEqual(generator, shown)
