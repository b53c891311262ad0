"""Generated IFEval cases: per instruction, references and responses meant to pass and to fail.

Used by the agreement test (referee's verdicts against lm-eval's) and by
``benchmarks/bench_ifeval.py``. Everything is drawn from one `random.Random(seed)`, so a seed
gives the same cases on every machine. Responses mix the constructs each check looks at
(bullets, highlights, titles, placeholders, sections, JSON, quotes, commas, postscripts),
first and last lines and asterisks that only loose mode removes, abbreviations and numbers
that Punkt must not split on, Unicode (accents, sigma, dotted I, the Kelvin sign, CJK,
emoji, right-to-left), and the edge cases every check gets: empty, blank, one character.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

# IFEval's kwargs are the union of every instruction's keys, None where unused (the HF rows).
IFEVAL_KEYS = (
    "num_highlights", "relation", "num_words", "num_placeholders", "prompt_to_repeat",
    "num_paragraphs", "nth_paragraph", "first_word", "num_bullets", "section_spliter",
    "num_sections", "capital_relation", "capital_frequency", "keywords", "num_sentences",
    "keyword", "frequency", "forbidden_words", "end_phrase", "postscript_marker", "language",
    "letter", "let_frequency", "let_relation",
)  # fmt: skip
RELATIONS = ("less than", "at least")

WORDS = (
    "the", "river", "ran", "quietly", "past", "an", "old", "mill", "while", "children", "played",
    "near", "the", "bridge", "and", "farmers", "counted", "sheep", "before", "the", "storm",
    "arrived", "from", "the", "western", "hills", "bringing", "rain", "history", "science",
    "music", "garden", "coffee", "travel", "planet", "ocean", "winter", "summer", "market",
    "city", "engineer", "teacher", "doctor", "story", "letter", "answer", "question", "idea",
    "problem", "solution", "energy",
)  # fmt: skip
SPICE = [
    "Dr. Smith",
    "e.g.",
    "i.e.",
    "U.S.",
    "3.14",
    "No. 5",
    "Mr. Brown",
    "etc.",
    "vs.",
    "a.m.",
    "NASA",
    "OK",
    "I",
    "U.K.",
    "AI",
    "FAQ",
    "café",
    "naïve",
    "Straße",
    "ΣΟΦΙΑ",
    "σοφία",
    "İstanbul",
    "\u212aelvin",
    "東京",
    "😀",
    "שלום",
    "«quoted»",
    '"quoted"',
    "'single'",
    "(paren)",
    "[bracket]",
    "{brace}",
    "C++",
    "x*y",
    "a_b",
    "well-known",
    "it's",
    "don't",
]
LANGUAGE_TEXT = {
    "en": "The weather is lovely today and we are going to the park to have a picnic.",
    "es": "El tiempo es muy agradable hoy y vamos al parque para hacer un picnic con amigos.",
    "fr": "Il fait très beau aujourd'hui et nous allons au parc pour faire un pique-nique.",
    "de": "Das Wetter ist heute schön und wir gehen in den Park, um ein Picknick zu machen.",
    "it": "Oggi il tempo è bellissimo e andiamo al parco a fare un picnic con gli amici.",
    "pt": "O tempo está lindo hoje e vamos ao parque fazer um piquenique com os amigos.",
    "ru": "Сегодня прекрасная погода, и мы идём в парк на пикник с нашими друзьями.",
    "uk": "Сьогодні чудова погода, і ми йдемо до парку на пікнік з нашими друзями.",
    "bg": "Днес времето е прекрасно и отиваме в парка на пикник с нашите приятели.",
    "ja": "今日は天気がとても良いので、友達と一緒に公園でピクニックをします。",
    "ko": "오늘은 날씨가 아주 좋아서 친구들과 함께 공원에서 소풍을 갑니다.",
    "ar": "الطقس جميل اليوم وسنذهب إلى الحديقة لتناول الطعام مع الأصدقاء.",
    "hi": "आज मौसम बहुत अच्छा है और हम दोस्तों के साथ पार्क में पिकनिक करने जा रहे हैं।",
    "fi": "Tänään on kaunis ilma ja menemme puistoon piknikille ystävien kanssa.",
    "pl": "Dzisiaj jest piękna pogoda i idziemy do parku na piknik z przyjaciółmi.",
    "vi": "Hôm nay thời tiết rất đẹp và chúng tôi đi công viên để dã ngoại với bạn bè.",
    "th": "วันนี้อากาศดีมากและเราจะไปปิกนิกที่สวนสาธารณะกับเพื่อน",
    "he": "מזג האוויר יפה היום ואנחנו הולכים לפארק לפיקניק עם חברים.",
    "fa": "امروز هوا بسیار خوب است و ما با دوستان برای پیک نیک به پارک می رویم.",
    "sw": "Hali ya hewa ni nzuri leo na tunaenda kwenye bustani kwa pikiniki na marafiki.",
}
EDGES = [
    "",
    " ",
    "\n",
    "\n\n",
    "*",
    "**",
    "***",
    "******",
    '"',
    '""',
    "a",
    "A",
    ",",
    ".",
    "1",
    "<<>>",
    "[]",
    "P.S.",
    "-",
    "* ",
    "\u200b",
    "😀",
    "ΣΣ",
    "\ufeff",
    "\t\n \r",
]


def _kwargs(**given: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(IFEVAL_KEYS)
    out.update(given)
    return out


def _sentence(rng: random.Random) -> str:
    words = rng.sample(WORDS, rng.randint(2, 9))
    if rng.random() < 0.5:
        words.insert(rng.randrange(len(words) + 1), rng.choice(SPICE))
    if rng.random() < 0.3:
        words[0] = words[0].capitalize()
    if rng.random() < 0.1:
        words = [w.upper() for w in words]
    return " ".join(words) + rng.choice([".", ".", "!", "?", "...", "", ".)", '."', ";"])


def _paragraph(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(1, 4)))


def _line(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.12:
        return rng.choice(["* ", "- ", "  * ", "-", "*  ", "+ ", "1. "]) + _sentence(rng)
    if kind < 0.2:
        return f"*{rng.choice(WORDS)}*" + rng.choice(["", " " + _sentence(rng)])
    if kind < 0.26:
        return f"**{rng.choice(WORDS)} {rng.choice(WORDS)}**"
    if kind < 0.3:
        return rng.choice(["<<", "<<<"]) + rng.choice([*WORDS, " ", ""]) + rng.choice([">>", ">"])
    if kind < 0.34:
        return f"[{rng.choice(WORDS)}]" + rng.choice(["", " and [", " [x] [y]"])
    if kind < 0.38:
        return rng.choice(["Section", "SECTION", "section", "Part"]) + rng.choice(
            [" 1", "2", " 3:", " X", " 10 "]
        )
    if kind < 0.41:
        return rng.choice(["***", "* * *", "---", "******", "", "   "])
    if kind < 0.44:
        return rng.choice(["P.S. ", "p.s. ", "P.P.S ", "PS ", "P. S. "]) + _sentence(rng)
    return _paragraph(rng)


def text(rng: random.Random) -> str:
    """A random response: lines and paragraphs, sometimes an opening and a closing line."""
    lines = [_line(rng) for _ in range(rng.randint(1, 8))]
    sep = rng.choice(["\n", "\n\n", "\n", " ", "\n\n\n"])
    out = sep.join(lines)
    if rng.random() < 0.25:
        out = rng.choice(["Sure! Here it is:", "**Answer**", "Okay.", "```"]) + "\n" + out
    if rng.random() < 0.25:
        out = out + "\n" + rng.choice(["Hope this helps!", "**End**", "```", "Thanks, bye."])
    if rng.random() < 0.1:
        out = rng.choice([" ", "\n", "  \n"]) + out + rng.choice([" ", "\n", ""])
    return out


def _with(rng: random.Random, base: str, piece: str, times: int = 1) -> str:
    """`base` with `piece` inserted `times` times at random word boundaries."""
    words = base.split(" ")
    for _ in range(times):
        words.insert(rng.randrange(len(words) + 1), piece)
    return " ".join(words)


# -- one generator per instruction: (kwargs, response) ---------------------------------------

Gen = Callable[[random.Random], tuple[dict[str, Any], str]]


def _keywords(rng: random.Random) -> tuple[dict[str, Any], str]:
    pool = [
        *WORDS[:20],
        "e.g",
        "cat",
        "Art",
        "ΣΟΦΙΑ",
        "naïve",
        "σοφ.α",
        "stra.e",
        "[ck]at",
        "colou?r",
    ]
    keywords = rng.sample(pool, rng.randint(1, 3))
    response = text(rng)
    for keyword in keywords:
        if rng.random() < 0.6:
            form = rng.choice([keyword, keyword.upper(), keyword.capitalize(), f"con{keyword}s"])
            response = _with(rng, response, form)
    return _kwargs(keywords=keywords), response


def _frequency(rng: random.Random) -> tuple[dict[str, Any], str]:
    keyword = rng.choice([*WORDS[:20], "an", "the", "a.m", " river "])
    frequency = rng.randint(1, 5)
    times = max(0, frequency + rng.choice([-1, 0, 0, 1, 2]))
    response = text(rng)
    for _ in range(times):
        response = _with(rng, response, rng.choice([keyword.strip(), keyword.strip().upper()]))
    return _kwargs(keyword=keyword, frequency=frequency, relation=rng.choice(RELATIONS)), response


def _forbidden(rng: random.Random) -> tuple[dict[str, Any], str]:
    words = rng.sample([*WORDS[:20], "can", "art", "café", "caf.", "İstanbul"], rng.randint(1, 3))
    response = text(rng)
    if rng.random() < 0.5:
        word = rng.choice(words)
        form = rng.choice([word, word.upper(), f"{word}s", f"{word}é", f"_{word}", f"({word})"])
        response = _with(rng, response, form)
    return _kwargs(forbidden_words=words), response


def _letter(rng: random.Random) -> tuple[dict[str, Any], str]:
    letter = rng.choice("abcdefghijklmnopqrstuvwxyzAEK\u212a")
    kwargs = _kwargs(
        letter=letter, let_frequency=rng.randint(1, 15), let_relation=rng.choice(RELATIONS)
    )
    return kwargs, text(rng)


def _language(rng: random.Random) -> tuple[dict[str, Any], str]:
    code = rng.choice([*LANGUAGE_TEXT, "en", "en", "ta", "ne"])
    said = rng.choice([*LANGUAGE_TEXT, code, code])
    response = LANGUAGE_TEXT.get(said, "")
    roll = rng.random()
    if roll < 0.2:
        response = text(rng)
    elif roll < 0.3:
        response = rng.choice(["12345", "!!!", "😀😀", "ok", "no", "2 + 2 = 4", "http://x.io"])
    elif roll < 0.45:
        response = response + " " + LANGUAGE_TEXT[rng.choice(list(LANGUAGE_TEXT))]
    elif roll < 0.55:
        response = "**" + response + "**\n" + rng.choice(["Sure.", "Claro.", "Bien sûr."])
    return _kwargs(language=code), response


def _sentences(rng: random.Random) -> tuple[dict[str, Any], str]:
    kwargs = _kwargs(num_sentences=rng.randint(1, 10), relation=rng.choice(RELATIONS))
    return kwargs, text(rng)


def _paragraphs(rng: random.Random) -> tuple[dict[str, Any], str]:
    wanted = rng.randint(1, 5)
    count = max(1, wanted + rng.choice([-1, 0, 0, 1]))
    paragraphs = [_paragraph(rng) for _ in range(count)]
    if rng.random() < 0.2:
        paragraphs.insert(rng.randrange(len(paragraphs) + 1), rng.choice(["", " ", "\n"]))
    response = rng.choice(["\n***\n", " *** ", "***", "\n\n***\n\n", "\n* * *\n"]).join(paragraphs)
    if rng.random() < 0.2:
        response = rng.choice(["***\n", "Title\n", "*** "]) + response
    if rng.random() < 0.2:
        response = response + rng.choice(["\n***", "\nThanks", " ***"])
    return _kwargs(num_paragraphs=wanted), response


def _words(rng: random.Random) -> tuple[dict[str, Any], str]:
    kwargs = _kwargs(num_words=rng.randint(3, 60), relation=rng.choice(RELATIONS))
    return kwargs, text(rng)


def _first_word(rng: random.Random) -> tuple[dict[str, Any], str]:
    wanted = rng.randint(1, 5)
    nth = rng.randint(1, wanted)
    first = rng.choice([*WORDS[:10], "Hello", "Über"])
    paragraphs = [_paragraph(rng) for _ in range(max(1, wanted + rng.choice([-1, 0, 0, 1])))]
    if nth <= len(paragraphs) and rng.random() < 0.7:
        lead = rng.choice([first, first.upper(), f'"{first}', f"'{first},", f"{first}.", "**"])
        paragraphs[nth - 1] = lead + " " + paragraphs[nth - 1]
    sep = rng.choice(["\n\n", "\n\n", "\n\n\n\n", "\n \n", "\n"])
    response = sep.join(paragraphs)
    if rng.random() < 0.15:
        response = "\n\n" + response
    kwargs = _kwargs(num_paragraphs=wanted, nth_paragraph=nth, first_word=first)
    return kwargs, response


def _placeholders(rng: random.Random) -> tuple[dict[str, Any], str]:
    wanted = rng.randint(1, 5)
    response = text(rng)
    for _ in range(max(0, wanted + rng.choice([-2, -1, 0, 0, 1]))):
        response = _with(rng, response, rng.choice(["[name]", "[a b]", "[]", "[x\ny]", "[[z]]"]))
    return _kwargs(num_placeholders=wanted), response


def _postscript(rng: random.Random) -> tuple[dict[str, Any], str]:
    marker = rng.choice(["P.S.", "P.P.S", "P.S.", "PS", "Note:", "p.s.", "P.S", " P.S. "])
    response = text(rng)
    if rng.random() < 0.6:
        tail = rng.choice(["P.S.", "p.s.", "P.P.S", "P. P. S", "PS", "Note:", "P.S", "p.s"])
        response = response + rng.choice(["\n", "\n\n", " "]) + tail + " " + _sentence(rng)
    return _kwargs(postscript_marker=marker), response


def _bullets(rng: random.Random) -> tuple[dict[str, Any], str]:
    wanted = rng.randint(1, 6)
    count = max(0, wanted + rng.choice([-1, 0, 0, 1]))
    items = [
        rng.choice(["* ", "- ", "  * ", "*", "-", "** ", "\t- "]) + _sentence(rng)
        for _ in range(count)
    ]
    extra = [_line(rng) for _ in range(rng.randint(0, 3))]
    extra += rng.sample(["", "  ", "\t", "\r", "\x0b", "\u2003", "*", "-", "**", " *x"], 2)
    lines = items + extra
    rng.shuffle(lines)
    return _kwargs(num_bullets=wanted), rng.choice(["\n", "\n\n"]).join(lines)


def _constrained(rng: random.Random) -> tuple[dict[str, Any], str]:
    options = ["My answer is yes.", "My answer is no.", "My answer is maybe.", "my answer is yes."]
    response = text(rng)
    if rng.random() < 0.6:
        response = _with(rng, response, rng.choice([*options, "My answer is yes"]))
    return _kwargs(), response


def _highlights(rng: random.Random) -> tuple[dict[str, Any], str]:
    wanted = rng.randint(1, 5)
    response = text(rng)
    for _ in range(max(0, wanted + rng.choice([-2, -1, 0, 1]))):
        piece = rng.choice(["*a b*", "**bold**", "* *", "****", "*x*y*", "**a*", "*\n*"])
        response = _with(rng, response, piece)
    return _kwargs(num_highlights=wanted), response


def _sections(rng: random.Random) -> tuple[dict[str, Any], str]:
    splitter = rng.choice(["Section", "SECTION", "PARAGRAPH", "Day", "Part", "Chapter", "Sec.ion"])
    wanted = rng.randint(1, 5)
    parts = []
    for i in range(max(0, wanted + rng.choice([-1, 0, 0, 1]))):
        mark = rng.choice([splitter] * 6 + [splitter.lower(), splitter.upper()])
        parts.append(f"{mark}{rng.choice([' ', '', '  '])}{i + 1}\n{_paragraph(rng)}")
    response = "\n\n".join(parts) or text(rng)
    return _kwargs(section_spliter=splitter, num_sections=wanted), response


def _json(rng: random.Random) -> tuple[dict[str, Any], str]:
    value = rng.choice([{"a": 1, "b": [1, 2]}, [1, "x"], "text", 3, None, {"ü": "😀"}])
    body = json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2]))
    roll = rng.random()
    if roll < 0.25:
        response = f"```json\n{body}\n```"
    elif roll < 0.35:
        response = f"```JSON\n{body}\n```"
    elif roll < 0.45:
        response = f"```\n{body}\n```"
    elif roll < 0.6:
        response = body
    elif roll < 0.7:
        response = f"Here it is:\n```json\n{body}\n```"
    elif roll < 0.8:
        response = rng.choice(["{'a': 1}", "{a: 1}", "[1, 2,]", "NaN", '{"a": Infinity}', "[]"])
    else:
        response = text(rng)
    return _kwargs(), response


def _title(rng: random.Random) -> tuple[dict[str, Any], str]:
    response = text(rng)
    if rng.random() < 0.6:
        title = rng.choice(["<<Poem of Joy>>", "<< >>", "<<a\nb>>", "<<<x>>>", "<<>>", "<<T>"])
        response = rng.choice([title + "\n" + response, response + " " + title])
    return _kwargs(), response


def _two(rng: random.Random) -> tuple[dict[str, Any], str]:
    first, second = _paragraph(rng), _paragraph(rng)
    roll = rng.random()
    if roll < 0.3:
        response = f"{first}\n******\n{second}"
    elif roll < 0.4:
        response = f"{first}\n******\n{first}"
    elif roll < 0.5:
        response = f"******\n{first}\n******\n{second}\n******"
    elif roll < 0.6:
        response = f"{first}\n******\n\n******\n{second}"
    elif roll < 0.7:
        response = f"{first} ****** {second} ****** {_paragraph(rng)}"
    else:
        response = text(rng)
    return _kwargs(), response


def _repeat(rng: random.Random) -> tuple[dict[str, Any], str]:
    prompt = _paragraph(rng)
    roll = rng.random()
    if roll < 0.4:
        response = prompt + "\n" + text(rng)
    elif roll < 0.5:
        response = "  " + prompt.upper() + " " + text(rng)
    elif roll < 0.6:
        response = "Sure.\n" + prompt + "\n" + text(rng)
    else:
        response = text(rng)
    return _kwargs(prompt_to_repeat=prompt), response


def _end(rng: random.Random) -> tuple[dict[str, Any], str]:
    phrase = rng.choice(["Any other questions?", "Is there anything else I can help with?", "bye"])
    response = text(rng)
    if rng.random() < 0.6:
        tail = rng.choice([phrase, phrase.lower(), f'"{phrase}"', phrase + ".", phrase + "\n"])
        response = response + rng.choice([" ", "\n", ""]) + tail
    return _kwargs(end_phrase=rng.choice([phrase, f" {phrase} "])), response


def _capital_words(rng: random.Random) -> tuple[dict[str, Any], str]:
    wanted = rng.randint(1, 8)
    response = text(rng)
    for _ in range(rng.randint(0, wanted + 2)):
        response = _with(rng, response, rng.choice(["NASA", "OK!", "I", "U.S.", "HELLO", "A1"]))
    kwargs = _kwargs(capital_frequency=wanted, capital_relation=rng.choice(RELATIONS))
    return kwargs, response


def _capital(rng: random.Random) -> tuple[dict[str, Any], str]:
    response = rng.choice([text(rng), LANGUAGE_TEXT[rng.choice(list(LANGUAGE_TEXT))]])
    if rng.random() < 0.6:
        response = response.upper()
    return _kwargs(), response


def _lowercase(rng: random.Random) -> tuple[dict[str, Any], str]:
    response = rng.choice([text(rng), LANGUAGE_TEXT[rng.choice(list(LANGUAGE_TEXT))]])
    if rng.random() < 0.6:
        response = response.lower()
    return _kwargs(), response


def _comma(rng: random.Random) -> tuple[dict[str, Any], str]:
    response = text(rng)
    if rng.random() < 0.5:
        response = response.replace(",", rng.choice(["", "，", ";"]))
    return _kwargs(), response


def _quotation(rng: random.Random) -> tuple[dict[str, Any], str]:
    body = text(rng)
    response = rng.choice([f'"{body}"', f' "{body}"\n', f"“{body}”", f'"{body}', body, '"'])
    return _kwargs(), response


GENERATORS: dict[str, Gen] = {
    "keywords:existence": _keywords,
    "keywords:frequency": _frequency,
    "keywords:forbidden_words": _forbidden,
    "keywords:letter_frequency": _letter,
    "language:response_language": _language,
    "length_constraints:number_sentences": _sentences,
    "length_constraints:number_paragraphs": _paragraphs,
    "length_constraints:number_words": _words,
    "length_constraints:nth_paragraph_first_word": _first_word,
    "detectable_content:number_placeholders": _placeholders,
    "detectable_content:postscript": _postscript,
    "detectable_format:number_bullet_lists": _bullets,
    "detectable_format:constrained_response": _constrained,
    "detectable_format:number_highlighted_sections": _highlights,
    "detectable_format:multiple_sections": _sections,
    "detectable_format:json_format": _json,
    "detectable_format:title": _title,
    "combination:two_responses": _two,
    "combination:repeat_prompt": _repeat,
    "startend:end_checker": _end,
    "change_case:capital_word_frequency": _capital_words,
    "change_case:english_capital": _capital,
    "change_case:english_lowercase": _lowercase,
    "punctuation:no_comma": _comma,
    "startend:quotation": _quotation,
}


def cases(instruction_id: str, n: int, seed: int = 0) -> list[tuple[dict[str, Any], str]]:
    """`n` (reference, response) pairs for one instruction, the edge cases first."""
    rng = random.Random(f"{instruction_id}/{seed}")
    generate = GENERATORS[instruction_id]
    out = []
    for i in range(n):
        kwargs, response = generate(rng)
        if i < len(EDGES):
            response = EDGES[i]
        reference = {"instruction_id_list": [instruction_id], "kwargs": [kwargs]}
        out.append((reference, response))
    return out


def mixed_cases(n: int, seed: int = 0) -> list[tuple[dict[str, Any], str]]:
    """`n` references of two to four instructions each (as IFEval's prompts have), one response.

    The response joins the responses generated for each instruction, so some of each pass.
    """
    rng = random.Random(f"mixed/{seed}")
    ids = list(GENERATORS)
    out = []
    for _ in range(n):
        chosen = rng.sample(ids, rng.randint(2, 4))
        pairs = [GENERATORS[i](rng) for i in chosen]
        response = rng.choice(["\n", "\n\n", " "]).join(r for _, r in pairs)
        reference = {"instruction_id_list": chosen, "kwargs": [k for k, _ in pairs]}
        out.append((reference, response))
    return out


# Every instruction once, with fixed arguments: the `instructions` option of the hostile
# battery (tests.support.options) and of the hostile tests here.
ALL_INSTRUCTIONS: dict[str, Any] = {
    "instruction_id_list": list(GENERATORS),
    "kwargs": [
        {"keywords": ["answer", "e.g"]},
        {"keyword": "a", "frequency": 2, "relation": "at least"},
        {"forbidden_words": ["lorem"]},
        {"letter": "a", "let_frequency": 3, "let_relation": "less than"},
        {"language": "en"},
        {"num_sentences": 3, "relation": "less than"},
        {"num_paragraphs": 2},
        {"num_words": 50, "relation": "at least"},
        {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"},
        {"num_placeholders": 2},
        {"postscript_marker": "P.S."},
        {"num_bullets": 3},
        {},
        {"num_highlights": 2},
        {"section_spliter": "Section", "num_sections": 2},
        {},
        {},
        {},
        {"prompt_to_repeat": "Repeat me."},
        {"end_phrase": "Any other questions?"},
        {"capital_frequency": 3, "capital_relation": "at least"},
        {},
        {},
        {},
        {},
    ],
}
