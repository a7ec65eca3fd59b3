# minigpu corpus: https://github.com/karpathy/minGPT/blob/37baab71b9abea1b76ab957409a1cc2fbfba8a26/mingpt/__init__.py
# (MIT: tests/programs/LICENSE-mingpt). As written upstream except the lines marked
# '# minigpu: changed' (imports).
