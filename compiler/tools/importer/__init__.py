"""`sparkc import RECIPE`: a recipe of another launcher as a sparkc spec, and what did not carry over.

Two shapes are read, both YAML: spark-vllm-docker's recipes (`recipes/*.yaml`: name, container, model,
defaults, env, command with `{placeholder}`s) and sparkrun's (the same keys plus runtime, min_nodes, ...).
The engine command's flags that sparkc manages become spec fields; the rest become engine.args. What a
recipe cannot say (the nodes' addresses, where the weights sit) is written as a marked placeholder.

recipe.py reads the recipe's keys, command.py the engine's command words, speculative.py its speculative
decoding flags, mods.py what is done to the image, and output.py writes the spec and the warnings.
"""

from compiler.tools.importer.output import PLACEHOLDER, Imported, RecipeError, RecipeWarning
from compiler.tools.importer.recipe import import_recipe

__all__ = ["PLACEHOLDER", "Imported", "RecipeError", "RecipeWarning", "import_recipe"]
