#!/usr/bin/env python3
"""`make check`: the layering check passes on the crate and catches an arrow planted back up."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..")


def layers(repo):
    return subprocess.run([sys.executable, os.path.join(HERE, "layers.py"), repo], capture_output=True, text=True)


class Layers(unittest.TestCase):
    def test_the_crate_points_one_way(self):
        done = layers(REPO)
        self.assertEqual(done.returncode, 0, done.stderr)

    def planted(self, file, text):
        """What the check says of the crates with `text` added to `file`."""
        with tempfile.TemporaryDirectory() as tmp:
            for folder in ("src", "crates"):
                shutil.copytree(os.path.join(REPO, folder), os.path.join(tmp, folder))
            with open(os.path.join(tmp, file), "a", encoding="utf-8") as f:
                f.write(text)
            return layers(tmp)

    def test_the_ledger_naming_the_registry_is_caught(self):
        done = self.planted("src/ledger.rs", "\nfn planted() { crate::kinds::register(); }\n")
        self.assertEqual(done.returncode, 1)
        self.assertIn("ledger (model) names kinds (registry)", done.stderr)

    def test_a_long_function_is_caught_and_a_brace_in_a_string_hides_nothing(self):
        body = "".join(f"    let _x{i} = \"{{\";\n" for i in range(100))
        done = self.planted("crates/figures/src/units.rs", f"\nfn planted() {{\n{body}}}\n")
        self.assertEqual(done.returncode, 1)
        self.assertIn("crates/figures/src/units.rs: fn planted has 102 lines (at most 100)", done.stderr)

    def test_the_load_generators_settings_naming_its_engine_is_caught(self):
        done = self.planted("crates/cql/src/settings/mod.rs", "\nfn planted() { crate::engine::task_seed(1); }\n")
        self.assertEqual(done.returncode, 1)
        self.assertIn("settings (grammar) names engine (load)", done.stderr)


if __name__ == "__main__":
    unittest.main()
