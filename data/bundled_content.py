"""Hand-written topics for the bundled task set (used by data/build_bundled.py).

Written for harnessrl_jax and released with the data under CC-BY-4.0 (see data/LICENSE).
Medical topics are everyday consumer-health questions with no dosing advice; reference
answers are short, plain and conservative. Fifty topics per domain: build_bundled.py keeps
ten of each for the held-out split.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class MedTopic:
  name: str
  question: str
  qlabel: str             # what the easy "mentions" criterion names
  qkw: tuple[str, ...]    # keywords taken from the question
  term_label: str
  term_kw: tuple[str, ...]
  nl: str                 # the main natural-language content criterion
  redflag: str            # when to see a clinician
  ref: str | None = None


@dataclasses.dataclass(frozen=True)
class SciTopic:
  name: str
  question: str
  qlabel: str
  qkw: tuple[str, ...]
  term: str               # a technical term a good answer uses (not given in the prompt)
  nl: str
  misconception: str
  ref: str | None = None


@dataclasses.dataclass(frozen=True)
class WriTopic:
  name: str
  request: str
  kw_label: str
  kw: tuple[str, ...]
  nl: str
  form_nl: str
  title: str
  postscript: str
  ref: str | None = None


@dataclasses.dataclass(frozen=True)
class Character:
  name: str
  role: str
  desc: str               # completes "You are NAME, ..."
  greeting: str
  signature: str
  question: str
  answer_nl: str
  ref: str | None = None  # reply after the greeting
  followup: str = ""      # closing question, used when the task asks for one


@dataclasses.dataclass(frozen=True)
class IfRequest:
  name: str
  request: str
  goal: str
  kw_label: str
  kw: tuple[str, ...]
  title: str
  ref: str | None = None  # written without commas, two to four sentences


M = MedTopic
MEDICAL = [
    M("tension headaches",
      "What usually causes tension headaches, and what can I do at home to ease them?",
      "headaches", ("headache", "headaches"), "stress", ("stress", "stressed"),
      "Names common triggers such as stress, poor posture, eye strain or too little sleep",
      "headaches are sudden and severe, follow a head injury, or come with fever or confusion",
      "Tension headaches are often triggered by stress, poor posture, eye strain, skipped meals or "
      "too little sleep. Rest, drink water, use a warm compress and stretch your neck and "
      "shoulders. See a doctor if a headache is sudden and severe or comes with fever or "
      "confusion."),
    M("sore throat",
      "My throat has been sore for two days. What helps, and when should I worry?",
      "the sore throat", ("throat", "throats"), "fluids", ("fluids", "water", "drink", "hydrated"),
      "Suggests comfort measures such as warm drinks, rest, lozenges or salt-water gargles",
      "it lasts more than a week or there is trouble breathing or swallowing",
      "Most sore throats come from viruses and ease within a week. Warm fluids, rest, lozenges and "
      "salt-water gargles help. See a doctor if it lasts over a week, you have a high fever, or "
      "you struggle to swallow or breathe."),
    M("hay fever",
      "Every spring my eyes itch and I sneeze a lot. How can I manage hay fever?",
      "hay fever or allergy", ("hay fever", "allergy", "allergies", "sneeze", "sneezing"),
      "pollen", ("pollen",),
      "Suggests reducing pollen exposure, e.g. keeping windows closed, showering after being "
      "outside, checking pollen counts",
      "symptoms are severe or over-the-counter remedies do not help",
      ),
    M("heartburn",
      "I often get heartburn after dinner. What lifestyle changes might help?",
      "heartburn", ("heartburn",), "acid", ("acid", "reflux"),
      "Suggests smaller meals, not lying down soon after eating, and limiting trigger foods",
      "heartburn happens most weeks, or there is trouble swallowing or weight loss",
      "Eat smaller meals, avoid lying down for two to three hours after dinner and cut back on "
      "fatty or spicy food, alcohol and caffeine. Raising the head of the bed can stop acid rising "
      "at night. See a doctor if heartburn is frequent or swallowing hurts."),
    M("sunburn",
      "I got a bad sunburn at the beach yesterday. How should I look after my skin?",
      "sunburn or skin", ("sunburn", "skin"), "cool water", ("cool", "cold"),
      "Advises cooling the skin, moisturising, drinking water and staying out of the sun",
      "there is blistering over a large area, fever, chills or dizziness"),
    M("dehydration",
      "What are the signs that I am not drinking enough water?",
      "water or drinking", ("water", "drinking", "drink"), "thirst", ("thirst", "thirsty"),
      "Lists signs such as thirst, dark urine, headache, tiredness and dizziness",
      "there is confusion, fainting, or no urine for many hours",
      "Common signs are thirst, dark yellow urine, peeing less often, a dry mouth, headache, "
      "tiredness and dizziness. Sip water through the day and more in heat or exercise. Seek "
      "medical care if someone is confused, faints or has not passed urine for many hours."),
    M("insomnia",
      "I keep waking up at 3 a.m. and cannot get back to sleep. Any tips?",
      "sleep", ("sleep", "asleep"), "routine", ("routine", "schedule", "regular"),
      "Gives sleep-hygiene tips such as a regular schedule, a dark cool room and less caffeine or "
      "screens late in the day",
      "poor sleep lasts for weeks or affects daytime functioning"),
    M("desk back pain",
      "My lower back aches after long days at my desk. What can I change?",
      "back pain or the desk", ("back", "desk"), "posture", ("posture", "chair"),
      "Suggests posture and chair adjustments, regular breaks to move and gentle stretches",
      "pain spreads down a leg or comes with numbness, weakness or bladder changes"),
    M("cold or flu",
      "How can I tell whether I have a cold or the flu?",
      "cold or flu", ("cold", "flu"), "fever", ("fever",),
      "Explains that flu usually starts suddenly with fever and body aches while a cold is milder "
      "and mostly affects the nose and throat",
      "there is shortness of breath, chest pain, or the person is high risk",
      "A cold usually builds slowly with a runny nose, sneezing and a sore throat. Flu tends to "
      "hit suddenly with fever, body aches, chills and exhaustion. Both need rest and fluids. See "
      "a doctor if you are short of breath, have chest pain or are in a high-risk group."),
    M("dry eyes",
      "My eyes feel dry and tired after a day on the computer. What helps?",
      "eyes or the computer", ("eyes", "eye", "computer", "screen"), "blinking",
      ("blink", "blinking"),
      "Suggests the 20-20-20 rule or regular screen breaks, blinking and screen position",
      "eyes are painful, red, or vision changes"),
    M("blisters",
      "My new shoes gave me blisters. Should I pop them?",
      "blisters or shoes", ("blister", "blisters", "shoes"), "infection", ("infection",
                                                                          "infected"),
      "Advises leaving blisters intact where possible and covering them with a dressing",
      "a blister shows signs of infection such as spreading redness, warmth or pus",
      "It is best not to pop a blister because the skin protects against infection. Cover it with "
      "a soft dressing and wear other shoes while it heals. See a doctor if it shows signs of "
      "infection such as spreading redness, warmth or pus."),
    M("eczema",
      "My skin gets dry, itchy patches in winter. How can I soothe eczema?",
      "eczema or itchy skin", ("eczema", "itchy", "skin"), "moisturiser",
      ("moisturiser", "moisturizer", "moisturise", "moisturize", "emollient"),
      "Suggests regular moisturising, lukewarm showers, gentle soap and avoiding scratching",
      "patches are weeping, infected, or not improving"),
    M("motion sickness",
      "I get car sick on long drives. How can I prevent motion sickness?",
      "motion or car sickness", ("motion", "car", "sick"), "horizon", ("horizon",),
      "Suggests sitting in the front, looking at the horizon, fresh air and not reading",
      "nausea is severe or happens without any motion"),
    M("jet lag",
      "I am flying across six time zones next week. How can I reduce jet lag?",
      "jet lag", ("jet lag",), "daylight", ("daylight", "sunlight", "light"),
      "Suggests shifting sleep before the trip, daylight at the destination and staying hydrated",
      "sleep problems persist long after the trip or there is a health condition to manage",
      "To ease jet lag start shifting your bedtime by an hour a day before you go. On arrival get "
      "daylight in the morning, eat at local times and drink water. Ask your doctor for advice "
      "first if you have a condition or take medicine on a strict schedule."),
    M("hiccups",
      "Why do we get hiccups and is there a way to stop them?",
      "hiccups", ("hiccups", "hiccup"), "diaphragm", ("diaphragm",),
      "Explains hiccups as involuntary spasms of the diaphragm and gives simple remedies",
      "hiccups last more than two days"),
    M("nosebleeds",
      "My child gets nosebleeds sometimes. What is the right first aid?",
      "the nosebleed", ("nosebleed", "nosebleeds", "nose"), "lean forward",
      ("forward",),
      "Advises sitting up, leaning forward and pinching the soft part of the nose",
      "bleeding lasts over 20 minutes, follows an injury, or happens often",
      "Sit your child up, lean them forward and pinch the soft part of the nose for ten minutes "
      "while they breathe through the mouth. Do not tip the head back. See a doctor or urgent care "
      "if bleeding lasts over 20 minutes or follows a knock to the head."),
    M("kitchen burn",
      "I touched a hot pan and burned my finger. What should I do right now?",
      "the burn", ("burn", "burned"), "cool running water", ("running water", "cool water",
                                                             "cold water"),
      "Advises cooling the burn under cool running water for about 20 minutes and covering it "
      "loosely",
      "the burn is large, deep, on the face or hands, or blisters badly"),
    M("sprained ankle",
      "I twisted my ankle playing football. How do I look after it?",
      "the ankle", ("ankle",), "ice", ("ice", "cold pack"),
      "Describes rest, ice, compression and elevation, and gradual return to movement",
      "you cannot put weight on it or it looks deformed",
      "Rest it, put ice wrapped in a cloth on it for 15 to 20 minutes at a time, use a compression "
      "bandage and keep it raised. Start gentle movement as pain allows. See a doctor if you "
      "cannot bear weight or the ankle looks misshapen."),
    M("constipation",
      "What everyday habits help with constipation?",
      "constipation", ("constipation", "constipated"), "fibre", ("fibre", "fiber"),
      "Suggests more fibre, more fluids and regular physical activity",
      "there is blood, severe pain, weight loss or a lasting change in habits"),
    M("dandruff",
      "What causes dandruff and how can I get rid of it?",
      "dandruff", ("dandruff",), "shampoo", ("shampoo",),
      "Explains dandruff as common flaking of the scalp and suggests regular washing with an "
      "anti-dandruff shampoo",
      "the scalp is red, swollen or does not improve"),
    M("mouth ulcers",
      "I keep getting small painful ulcers inside my mouth. Why, and what helps?",
      "mouth ulcers", ("ulcers", "ulcer", "mouth"), "stress", ("stress",),
      "Names common triggers such as minor injury, stress or certain foods, and soothing measures",
      "an ulcer lasts longer than three weeks or they keep coming back",
      "Small mouth ulcers often follow a bite or scrape, stress, or acidic and spicy foods. They "
      "usually heal within two weeks. Rinse with salt water and avoid foods that sting. See a "
      "doctor or dentist if one lasts over three weeks."),
    M("acne",
      "What is a sensible skincare routine for mild acne?",
      "acne", ("acne",), "gentle cleanser", ("gentle", "cleanser"),
      "Suggests gentle twice-daily cleansing, not picking spots and non-comedogenic products",
      "acne is severe, scarring, or affecting mood"),
    M("shin splints",
      "My shins hurt after I started running. What should I do?",
      "shins or running", ("shin", "shins", "running"), "rest", ("rest",),
      "Suggests rest, ice and a gradual return with good shoes and softer surfaces",
      "pain persists at rest or one spot is very tender, which may mean a stress fracture"),
    M("snoring",
      "My partner says I snore loudly. What can I try?",
      "snoring", ("snore", "snoring"), "sleep apnea", ("apnea", "apnoea"),
      "Suggests sleeping on the side, limiting alcohol at night and weight management",
      "there are pauses in breathing, gasping, or daytime sleepiness"),
    M("tinnitus",
      "I hear a ringing in my ears after concerts. Is that a problem?",
      "ringing ears", ("ringing", "ears", "ear"), "hearing protection",
      ("earplugs", "ear plugs", "protection"),
      "Explains that loud noise can damage hearing and recommends ear protection",
      "ringing lasts more than a few days or hearing drops",
      "Ringing after loud music is a warning that the noise was loud enough to harm your hearing. "
      "It often fades within a day or two. Wear earplugs at concerts and take quiet breaks. See a "
      "doctor if the ringing lasts more than a few days or your hearing changes."),
    M("heat exhaustion",
      "What are the signs of heat exhaustion on a hot day?",
      "heat", ("heat", "hot"), "shade", ("shade", "cool place", "cooler place"),
      "Lists signs such as heavy sweating, dizziness, nausea and headache, and says to cool down",
      "symptoms do not improve within 30 minutes or there is confusion",
      "Signs of heat exhaustion include heavy sweating, pale clammy skin, dizziness, headache, "
      "nausea and cramps. Move to shade, loosen clothing, sip water and cool the skin. Call "
      "emergency services if the person is confused or does not improve within 30 minutes."),
    M("bee sting",
      "I was stung by a bee. How should I treat it?",
      "the sting", ("sting", "stung", "bee"), "remove the stinger", ("stinger",),
      "Advises removing the stinger, washing the area and using a cold compress",
      "there is swelling of the face or throat, or trouble breathing"),
    M("panic feelings",
      "Sometimes my heart races and I feel panicky. What can I do in the moment?",
      "panic or a racing heart", ("panic", "panicky", "heart"), "breathing",
      ("breathe", "breathing", "breath"),
      "Suggests slow breathing and grounding techniques in a calm, non-judgemental way",
      "episodes are frequent, or there is chest pain or fainting"),
    M("tiredness",
      "I feel tired all the time even though I sleep eight hours. Why might that be?",
      "tiredness", ("tired", "tiredness"), "iron", ("iron", "anaemia", "anemia"),
      "Lists possible causes such as poor sleep quality, stress, diet, low iron or thyroid "
      "problems",
      "tiredness lasts for weeks without an obvious reason"),
    M("blood pressure",
      "My blood pressure reading was a bit high. What lifestyle changes help?",
      "blood pressure", ("blood pressure",), "salt", ("salt", "sodium"),
      "Suggests less salt, regular exercise, limiting alcohol and a healthy weight",
      "readings stay high or come with headache or chest pain",
      "Eat less salt and more fruit and vegetables, be active most days, limit alcohol, stop "
      "smoking and aim for a healthy weight. Check your blood pressure again on other days. See a "
      "doctor to discuss your readings and whether you need treatment."),
    M("type 2 diabetes risk",
      "What raises the risk of type 2 diabetes, and can it be lowered?",
      "diabetes", ("diabetes",), "exercise", ("exercise", "active", "activity"),
      "Names risk factors such as excess weight, inactivity and family history, and says lifestyle "
      "changes lower the risk",
      "there is constant thirst, frequent urination or unexplained weight loss"),
    M("cholesterol",
      "What foods help keep cholesterol in a healthy range?",
      "cholesterol", ("cholesterol",), "fibre", ("fibre", "fiber", "oats"),
      "Suggests oats, beans, nuts, oily fish and less saturated fat",
      "a test shows high cholesterol or there is heart disease in the family",
      "Oats, beans, lentils, nuts, fruit, vegetables and oily fish help. Swap butter and fatty "
      "meat for olive oil and lean protein to cut saturated fat. Ask your doctor about a "
      "cholesterol test if heart disease runs in your family."),
    M("vitamin d",
      "How do we get vitamin D, and why does it matter?",
      "vitamin D", ("vitamin d",), "bones", ("bone", "bones"),
      "Explains that skin makes vitamin D in sunlight, some foods contain it, and it supports "
      "bones",
      "a deficiency is suspected, for example with bone pain or little sun exposure"),
    M("hand washing",
      "Why does washing hands properly matter so much?",
      "hand washing", ("hands", "washing", "wash"), "germs", ("germs", "bacteria", "viruses"),
      "Explains that hand washing removes germs and prevents spreading infections",
      "someone has a persistent infection or skin damage from washing",
      "Hands pick up germs from surfaces and other people and carry them to the mouth, nose and "
      "eyes. Washing with soap for 20 seconds removes most of them and cuts the spread of colds "
      "and stomach bugs. See a doctor if frequent washing cracks or hurts your skin."),
    M("bleeding gums",
      "My gums bleed when I brush my teeth. What does that mean?",
      "gums", ("gums", "gum"), "flossing", ("floss", "flossing"),
      "Explains that bleeding gums often signal gum inflammation and suggests gentle brushing and "
      "flossing",
      "bleeding continues for more than two weeks",
      ),
    M("ear wax",
      "Is it safe to clean my ears with cotton swabs?",
      "ears or cotton swabs", ("ears", "ear", "cotton", "swabs"), "ear wax", ("wax",),
      "Explains that swabs can push wax deeper or hurt the eardrum and ears usually clean "
      "themselves",
      "there is pain, discharge, or blocked hearing",
      "It is better not to, because swabs can push wax deeper or scratch the eardrum. Ears usually "
      "clean themselves and wiping the outer ear is enough. See a doctor or nurse if you have ear "
      "pain, discharge or muffled hearing."),
    M("food poisoning",
      "I think I ate something bad and have an upset stomach. How do I recover?",
      "the upset stomach", ("stomach",), "fluids", ("fluids", "water", "hydrated"),
      "Advises small sips of fluid, rest and bland food as appetite returns",
      "there is blood, high fever, signs of dehydration, or symptoms last over three days"),
    M("tick bite",
      "I found a tick on my leg after a hike. What should I do?",
      "the tick", ("tick",), "tweezers", ("tweezers",),
      "Describes removing the tick close to the skin with fine tweezers and cleaning the area",
      "a rash or fever appears in the following weeks"),
    M("head lice",
      "My daughter has head lice. How do we get rid of them?",
      "head lice", ("lice",), "comb", ("comb", "combing"),
      "Suggests wet combing with a fine-toothed lice comb and checking family members",
      "treatment keeps failing or the scalp looks infected"),
    M("athlete's foot",
      "My toes are itchy and the skin is peeling. Could it be athlete's foot?",
      "athlete's foot or toes", ("athlete's foot", "toes", "feet", "foot"), "dry",
      ("dry", "drying"),
      "Explains it is a fungal infection and advises keeping feet clean and dry",
      "it spreads, becomes painful, or the person has diabetes",
      "It could be. Athlete's foot is a common fungal infection that causes itchy peeling skin "
      "between the toes. Wash and dry your feet well and change socks daily. A pharmacist can "
      "suggest a treatment and a doctor should check it if it spreads."),
    M("stye",
      "I have a red painful bump on my eyelid. What helps a stye heal?",
      "the eyelid or stye", ("eyelid", "stye"), "warm compress", ("warm",),
      "Suggests warm compresses and not squeezing the stye",
      "it affects vision, spreads, or does not improve within a couple of weeks"),
    M("night cramps",
      "I get painful leg cramps at night. What can I do?",
      "leg cramps", ("cramps", "cramp", "leg"), "stretch", ("stretch", "stretching"),
      "Suggests stretching the calf, staying hydrated and gentle daytime activity",
      "cramps are frequent, severe, or come with swelling or weakness"),
    M("wrist strain",
      "My wrist aches after typing all day. How can I protect it?",
      "the wrist or typing", ("wrist", "typing"), "breaks", ("break", "breaks"),
      "Suggests a neutral wrist position, keyboard and mouse adjustments and regular breaks",
      "there is numbness, tingling or weakness in the hand"),
    M("migraine triggers",
      "What are common migraine triggers I could track?",
      "migraine", ("migraine", "migraines"), "diary", ("diary", "journal", "log"),
      "Lists triggers such as missed meals, poor sleep, stress and hormonal changes, and suggests "
      "a diary",
      "migraines change pattern or come with weakness or speech problems",
      "Common triggers include missed meals, poor or irregular sleep, stress, dehydration, bright "
      "light, alcohol and hormonal changes. Keep a diary of food, sleep and headaches to spot "
      "patterns. See a doctor if your migraines change or come with weakness."),
    M("child fever",
      "My toddler has a mild fever. When is it time to call a doctor?",
      "the fever", ("fever",), "temperature", ("temperature",),
      "Lists warning signs in a young child such as a rash, stiff neck, unusual drowsiness or "
      "breathing trouble",
      "the child is very young, unusually drowsy, has a rash, or is not drinking"),
    M("sunscreen",
      "How should I choose and use sunscreen?",
      "sunscreen", ("sunscreen",), "SPF", ("spf",),
      "Recommends broad-spectrum SPF 30 or higher, applied generously and reapplied",
      "a mole changes shape or colour",
      "Choose a broad-spectrum sunscreen with SPF 30 or higher. Apply it generously 15 minutes "
      "before going out and reapply every two hours and after swimming. Ask a doctor or "
      "dermatologist to check any mole that changes shape or colour."),
    M("concussion",
      "My son bumped his head at football practice. What signs should I watch for?",
      "the head bump", ("head",), "concussion", ("concussion",),
      "Lists warning signs such as vomiting, confusion, worsening headache or drowsiness",
      "there is vomiting, confusion, drowsiness or a worsening headache"),
    M("heel pain",
      "My heel hurts when I take my first steps in the morning. Why?",
      "the heel", ("heel",), "plantar fasciitis", ("plantar",),
      "Explains a common cause such as plantar fasciitis and suggests stretching and supportive "
      "shoes",
      "pain is severe, follows an injury, or lasts for weeks"),
    M("urinary infection",
      "It stings when I pee and I need to go often. What could that be?",
      "the stinging or peeing", ("pee", "stings", "sting"), "infection", ("infection", "UTI"),
      "Explains this may be a urinary tract infection and that it usually needs assessment",
      "there is fever, back pain, blood in the urine, or pregnancy"),
    M("frostbite",
      "How can I tell if my fingers have frostbite after a winter walk?",
      "frostbite or fingers", ("frostbite", "fingers"), "rewarm", ("rewarm", "warm"),
      "Describes numbness, pale or hard skin, and gentle rewarming without rubbing",
      "skin stays numb, turns dark, or blisters"),
]

S = SciTopic
SCIENCE = [
    S("sky colour", "Why is the sky blue during the day?", "the sky", ("sky",),
      "scattering", "Explains that air molecules scatter shorter blue wavelengths of sunlight "
      "more than red", "the sky reflects the ocean",
      "Sunlight contains all colours. Air molecules scatter short blue wavelengths much more than "
      "long red ones, an effect called Rayleigh scattering. That scattered blue light reaches our "
      "eyes from every direction, so the sky looks blue."),
    S("seasons", "What causes the seasons on Earth?", "seasons", ("seasons", "season"),
      "tilt", "Explains that Earth's axial tilt changes how directly sunlight hits each "
      "hemisphere through the year", "Earth is closer to the Sun in summer",
      "Earth's axis has a tilt of about 23 degrees. As Earth orbits the Sun each hemisphere takes "
      "turns leaning toward it. The hemisphere tilted toward the Sun gets more direct light and "
      "longer days, which is summer. This is what causes the seasons."),
    S("tides", "What causes ocean tides?", "tides", ("tides", "tide"), "gravity",
      "Explains that the Moon's gravity (and the Sun's) pulls on the oceans, creating bulges as "
      "Earth rotates", "tides are caused by wind"),
    S("moon phases", "Why does the Moon seem to change shape over a month?", "the Moon",
      ("moon",), "phases", "Explains that we see different portions of the Moon's sunlit "
      "half as it orbits Earth", "Earth's shadow causes the phases",
      "The Moon is always half lit by the Sun. As it orbits Earth over about a month we see "
      "different amounts of that lit half. These changing views are the Moon's phases."),
    S("vaccines", "How do vaccines help the body fight disease?", "vaccines",
      ("vaccines", "vaccine"), "immune", "Explains that vaccines train the immune system to "
      "recognise a germ so it responds faster later", "vaccines cure an infection you "
      "already have"),
    S("dna", "What is DNA and what does it do?", "DNA", ("dna",), "genes",
      "Explains DNA as the molecule carrying genetic instructions, organised into genes that code "
      "for proteins", "DNA is only found in humans",
      "DNA is a long molecule found in the cells of living things. Its sequence stores "
      "instructions in sections called genes. Cells read genes to build proteins that shape how "
      "the organism grows and works."),
    S("natural selection", "How does natural selection work?", "natural selection",
      ("selection",), "evolution", "Explains variation, heritability and differential "
      "survival and reproduction", "individuals evolve during their lifetime"),
    S("greenhouse effect", "What is the greenhouse effect?", "the greenhouse effect",
      ("greenhouse",), "carbon dioxide", "Explains that gases such as carbon dioxide trap "
      "outgoing heat and warm the planet", "the greenhouse effect is caused by the ozone "
      "hole",
      "Sunlight warms Earth and the surface gives off heat as infrared light. Gases such as carbon "
      "dioxide and water vapour absorb some of that heat and send it back down. This keeps Earth "
      "warmer than it would otherwise and is called the greenhouse effect."),
    S("plate tectonics", "Why do continents move?", "continents", ("continents",), "plates",
      "Explains that Earth's crust is split into plates carried by slow mantle convection",
      "continents float on an ocean of liquid lava"),
    S("volcanoes", "Why do volcanoes erupt?", "volcanoes", ("volcanoes", "volcano"), "magma",
      "Explains that molten rock and gas build pressure beneath the surface until they escape",
      "all volcanoes are found only in hot countries",
      "Deep underground rock melts into magma that is lighter than the rock around it. It rises "
      "and collects in chambers with dissolved gases. When the pressure grows too great the magma "
      "and gas burst out of the volcano as an eruption."),
    S("rainbows", "How does a rainbow form?", "rainbows", ("rainbow",), "refraction",
      "Explains that raindrops refract, reflect and split sunlight into its colours",
      "rainbows are a physical object at a fixed place"),
    S("thunder", "Why do we see lightning before we hear thunder?", "lightning and thunder",
      ("lightning", "thunder"), "speed of sound", "Explains that light travels far faster than "
      "sound", "thunder and lightning are unrelated",
      "Lightning and thunder happen at the same moment. Light travels about a million times faster "
      "than the speed of sound so the flash reaches us almost instantly. The sound of thunder "
      "takes about three seconds to travel one kilometre."),
    S("sound", "How does sound travel from a guitar to my ears?", "sound", ("sound",),
      "vibrations", "Explains that vibrations pass as pressure waves through the air to the "
      "eardrum", "sound can travel through empty space"),
    S("floating ice", "Why does ice float on water?", "ice", ("ice",), "density",
      "Explains that water expands when it freezes so ice is less dense than liquid water",
      "ice floats because it contains air bubbles",
      "When water freezes its molecules lock into an open crystal pattern held by hydrogen bonds. "
      "That takes up more space than liquid water. Ice therefore has a lower density than water "
      "and floats."),
    S("boiling at altitude", "Why does water boil at a lower temperature on a mountain?",
      "boiling or the mountain", ("boil", "mountain"), "pressure", "Explains that lower air "
      "pressure lets water molecules escape into vapour at a lower temperature", "water "
      "boils at 100 degrees Celsius everywhere"),
    S("states of matter", "What is the difference between a solid, a liquid and a gas?",
      "solid, liquid or gas", ("solid", "liquid", "gas"), "particles", "Explains how particle "
      "spacing and movement differ between the three states", "gases have no mass",
      "In a solid particles are packed tightly and only vibrate in place. In a liquid they stay "
      "close but slide past each other. In a gas the particles are far apart and move freely to "
      "fill their container."),
    S("atoms", "What is inside an atom?", "the atom", ("atom",), "electrons", "Describes a "
      "nucleus of protons and neutrons with electrons around it", "atoms are solid balls"),
    S("physical vs chemical change", "What is the difference between a physical change and "
      "a chemical change?", "physical or chemical change", ("physical", "chemical"),
      "new substance", "Explains that a chemical change makes a new substance while a "
      "physical change does not", "melting is a chemical change"),
    S("acids and bases", "What do acids and bases have to do with the pH scale?",
      "acids or bases", ("acids", "bases", "ph"), "hydrogen ions", "Explains that pH measures "
      "acidity on a 0 to 14 scale with 7 neutral", "all acids are dangerous",
      "The pH scale runs from 0 to 14 and shows how acidic a solution is. Acids have a pH below 7 "
      "and release hydrogen ions in water. Bases have a pH above 7 and pure water is neutral at "
      "7."),
    S("rust", "Why does iron rust?", "iron or rust", ("iron", "rust"), "oxygen",
      "Explains that iron reacts with oxygen and water to form iron oxide", "rust is a kind "
      "of dirt that collects on metal"),
    S("magnets", "How do magnets attract and repel each other?", "magnets", ("magnets",
                                                                           "magnet"),
      "poles", "Explains north and south poles: like poles repel and opposite poles attract",
      "magnets attract every metal"),
    S("electric circuits", "How does a simple electric circuit light a bulb?",
      "the circuit or bulb", ("circuit", "bulb"), "current", "Explains that a closed loop lets "
      "current flow from the battery through the bulb and back", "electricity is used up in "
      "the bulb",
      "A battery pushes electric charge around a closed loop of wire. This flow is called a "
      "current. As it passes through the thin filament of the bulb the filament heats up and "
      "glows. Opening a switch breaks the loop and the light goes out."),
    S("static electricity", "Why does rubbing a balloon on my hair make it stick to the "
      "wall?", "the balloon", ("balloon",), "electrons", "Explains that rubbing transfers "
      "electrons, giving the balloon a charge that attracts the wall", "static electricity "
      "is a kind of magnetism"),
    S("orbits", "Why does the Moon not fall down to Earth?", "the Moon", ("moon",), "orbit",
      "Explains that the Moon is falling toward Earth but moves sideways fast enough to keep "
      "missing it", "there is no gravity in space"),
    S("black holes", "What is a black hole?", "black holes", ("black hole",), "gravity",
      "Explains a region where gravity is so strong that not even light can escape",
      "black holes suck in everything in the universe",
      "A black hole is a region of space where matter is packed so tightly that its gravity "
      "becomes overwhelming. Past a boundary called the event horizon not even light can escape. "
      "Many form when very massive stars collapse."),
    S("stars shining", "Why do stars shine?", "stars", ("stars",), "fusion", "Explains that "
      "nuclear fusion of hydrogen into helium in the core releases energy", "stars are "
      "burning like a fire"),
    S("water cycle", "How does the water cycle work?", "the water cycle", ("water",),
      "evaporation", "Describes evaporation, condensation into clouds, precipitation and "
      "collection", "clouds are made of water vapour gas",
      "The Sun heats water in oceans and lakes and turns it into vapour by evaporation. The vapour "
      "cools as it rises and condenses into droplets that form clouds. Droplets join and fall as "
      "rain or snow. The water collects in rivers and seas and the cycle repeats."),
    S("antibiotics", "Why don't antibiotics work against colds?", "antibiotics",
      ("antibiotics",), "viruses", "Explains that antibiotics target bacteria while colds "
      "are caused by viruses", "antibiotics kill all germs"),
    S("enzymes", "What do enzymes do in our bodies?", "enzymes", ("enzymes", "enzyme"),
      "catalyst", "Explains that enzymes are proteins that speed up chemical reactions such "
      "as digestion", "enzymes are living organisms"),
    S("mitochondria", "What do mitochondria do in a cell?", "mitochondria",
      ("mitochondria",), "energy", "Explains that mitochondria release energy from food "
      "through respiration, producing ATP", "only animal cells need energy",
      "Mitochondria are small structures inside most cells. They use oxygen to break down sugars "
      "from food in a process called cellular respiration. This releases energy stored as ATP "
      "which powers the rest of the cell."),
    S("neurons", "How do nerve cells send messages?", "nerve cells", ("nerve",),
      "neurons", "Explains electrical signals along the cell and chemical messengers across "
      "the gap to the next cell", "nerves carry messages as sound"),
    S("erosion", "How do rivers shape valleys over time?", "rivers or valleys", ("rivers",
                                                                              "valleys"),
      "erosion", "Explains that flowing water wears away and carries rock and soil",
      "valleys were carved in a single flood"),
    S("fossils", "How do fossils form?", "fossils", ("fossils", "fossil"), "sediment",
      "Explains burial in sediment and minerals slowly replacing or preserving remains",
      "fossils are the original bones unchanged",
      "When a plant or animal dies it can be buried quickly by mud or sand. Over long ages more "
      "sediment piles on top and hardens into rock. Minerals seep in and replace the remains bit "
      "by bit, leaving a stone copy called a fossil."),
    S("salty ocean", "Why is the ocean salty but rivers are not?", "the ocean or rivers",
      ("ocean", "rivers"), "minerals", "Explains that rivers carry small amounts of dissolved "
      "minerals to the sea where evaporation leaves the salt behind", "the salt comes only "
      "from fish"),
    S("speed of light", "How fast does light travel, and can anything go faster?",
      "light", ("light",), "speed of light", "States roughly 300,000 km per second and that "
      "nothing with mass reaches it", "light travels instantly"),
    S("bent straw", "Why does a straw look bent in a glass of water?", "the straw",
      ("straw",), "refraction", "Explains that light changes direction as it passes from "
      "water to air", "the straw actually bends",
      "Light travels more slowly in water than in air. When light from the straw leaves the water "
      "it changes direction at the surface. This bending is called refraction and it makes the "
      "straw seem broken at the waterline."),
    S("doppler effect", "Why does an ambulance siren change pitch as it passes?",
      "the siren", ("siren",), "Doppler effect", "Explains that sound waves bunch up in front "
      "of a moving source and spread out behind it", "the driver changes the siren"),
    S("half-life", "What does half-life mean for radioactive material?", "half-life",
      ("half-life",), "decay", "Explains that half-life is the time for half of the "
      "radioactive atoms to decay", "after two half-lives nothing is left",
      "Radioactive atoms decay at random. The half-life is the time it takes for half of the atoms "
      "in a sample to decay. After another half-life half of the rest decays, leaving a quarter."),
    S("friction", "What is friction and why does it matter?", "friction", ("friction",),
      "force", "Explains friction as a force that resists sliding and gives everyday examples",
      "friction only happens on rough surfaces"),
    S("buoyancy", "How can a huge steel ship float?", "the ship", ("ship",), "buoyancy",
      "Explains that the hull displaces a weight of water equal to the ship's weight",
      "ships float because steel is light",
      "A ship's hull is shaped to push aside a large volume of water. The water pushes back with "
      "an upward force called buoyancy that equals the weight of the water moved. The hull is "
      "mostly air inside, so the ship floats."),
    S("osmosis", "What is osmosis?", "osmosis", ("osmosis",), "membrane", "Explains water "
      "moving through a membrane from a dilute solution toward a concentrated one",
      "salt moves through the membrane instead of water"),
    S("camouflage", "How does camouflage help animals survive?", "camouflage",
      ("camouflage",), "predators", "Explains blending into surroundings to avoid predators "
      "or to ambush prey", "animals choose their colours on purpose"),
    S("pollination", "Why do flowers need bees?", "flowers or bees", ("flowers", "bees"),
      "pollen", "Explains that bees carry pollen between flowers, letting plants make seeds",
      "bees make flowers grow",
      "Many flowers need pollen from another flower of the same kind to make seeds. Bees visit "
      "flowers for nectar and pollen sticks to their bodies. When they fly to the next flower some "
      "pollen rubs off and fertilises it."),
    S("coral bleaching", "What is coral bleaching?", "coral", ("coral",), "algae",
      "Explains that stressed corals expel the algae living in them and turn white",
      "bleached coral has been painted by pollution"),
    S("ozone layer", "What does the ozone layer do?", "the ozone layer", ("ozone",),
      "ultraviolet", "Explains that ozone in the stratosphere absorbs harmful ultraviolet "
      "light", "the ozone hole causes global warming"),
    S("batteries", "How does a battery store energy?", "batteries", ("battery",),
      "chemical", "Explains stored chemical energy turning into electrical energy through "
      "reactions", "batteries store electricity like water in a tank"),
    S("earthquakes", "What causes earthquakes?", "earthquakes", ("earthquakes",
                                                                "earthquake"),
      "faults", "Explains stress building along faults between plates and being released "
      "suddenly", "earthquakes are caused by the weather",
      "Earth's crust is broken into plates that slowly push past each other. Along cracks called "
      "faults the rocks catch and stress builds up. When the rocks suddenly slip that stored "
      "energy shakes the ground as an earthquake."),
    S("photosynthesis", "How do plants make their own food?", "plants", ("plants",),
      "photosynthesis", "Explains that plants use light energy to turn carbon dioxide and "
      "water into sugar and oxygen", "plants get their food from the soil",
      "Plants make food by photosynthesis. Their leaves capture sunlight with a green pigment "
      "called chlorophyll. They use that energy to turn water and carbon dioxide into sugar and "
      "they release oxygen."),
    S("carbon cycle", "What is the carbon cycle?", "the carbon cycle", ("carbon",),
      "photosynthesis", "Describes carbon moving between air, living things, oceans and "
      "rocks", "carbon only exists in the air"),
    S("lasers", "What makes laser light different from a torch?", "laser", ("laser",),
      "wavelength", "Explains that laser light is a single wavelength travelling in step in "
      "a narrow beam", "lasers are made of solid light"),
    S("clouds", "Why are clouds white but storm clouds grey?", "clouds", ("clouds",),
      "droplets", "Explains that droplets scatter all colours equally and thick clouds block "
      "light from above", "grey clouds are full of smoke"),
]

W = WriTopic
WRITING = [
    W("morning coffee", "Write a haiku about morning coffee.", "coffee", ("coffee",),
      "Evokes the sensations of morning coffee", "Reads as a haiku: three short lines",
      "Morning Cup", "P.S. Best enjoyed slowly.",
      "Steam from black coffee\nthe kitchen slowly wakes up\nwarmth between my hands"),
    W("lighthouse", "Write a short poem about a lighthouse in a storm.", "the lighthouse",
      ("lighthouse",), "Conveys the storm and the lighthouse's steady light", "Reads as a "
      "poem with line breaks", "The Keeper's Light", "P.S. Every coast needs a keeper."),
    W("first snow", "Write a four-line poem about the first snow of winter.", "snow",
      ("snow",), "Captures the quiet and wonder of the first snowfall", "Has four lines of "
      "verse", "First Snow", "P.S. Go outside before it melts.",
      "The first snow falls without a sound\nand softly paints the sleeping ground\nthe "
      "street lamps glow in silver light\nthe world is new and hushed and white"),
    W("lost umbrella", "Write a short story opening about a lost umbrella.", "the umbrella",
      ("umbrella",), "Sets up a scene or mystery around the umbrella", "Reads as the opening "
      "of a story, not a summary", "The Yellow Umbrella", "P.S. Someone is still looking "
      "for it."),
    W("night bus", "Write a short scene on a city bus late at night.", "the bus", ("bus",),
      "Creates a clear late-night atmosphere with concrete details", "Reads as a narrative "
      "scene", "Route 9 After Midnight", "P.S. Always sit near the driver."),
    W("grandmother's garden", "Write a short poem about a grandmother's garden.",
      "the garden", ("garden",), "Uses sensory details of the garden and a sense of "
      "memory", "Reads as a poem with line breaks", "Her Garden",
      "P.S. The roses still bloom every June.",
      "Her garden hums with bees at noon\nsweet peas climb the fence in June\nI still can "
      "smell the mint and rain\nand hear her call my name again"),
    W("old bicycle", "Write a limerick about an old bicycle.", "the bicycle",
      ("bicycle", "bike"), "Is playful and centred on the bicycle", "Reads as a limerick: "
      "five lines with an AABBA rhyme", "The Rusty Bike", "P.S. Oil the chain."),
    W("thunderstorm", "Describe a summer thunderstorm in one short paragraph.", "the storm",
      ("storm", "thunderstorm", "thunder"), "Uses vivid sound, light and smell details",
      "Is a single descriptive paragraph", "Summer Storm", "P.S. Count the seconds after "
      "the flash.",
      "The afternoon air turned heavy and still. Then the sky cracked open with thunder and fat "
      "raindrops drummed on the roof. Lightning lit the street in white flashes and the smell of "
      "wet dust rose from the pavement."),
    W("new town", "Write a short diary entry about moving to a new town.", "the new town",
      ("town",), "Conveys mixed feelings about the move with specific details", "Reads as "
      "a first-person diary entry", "Day One", "P.S. Find the best bakery by Friday."),
    W("library", "Write a short poem about a quiet library.", "the library", ("library",),
      "Evokes the quiet, books and atmosphere of a library", "Reads as a poem with line "
      "breaks", "Between the Shelves", "P.S. Return your books on time."),
    W("window cat", "Write a haiku about a cat on a windowsill.", "the cat", ("cat",),
      "Creates a calm image of the cat at the window", "Reads as a haiku: three short lines",
      "Window Watch", "P.S. The cat is still there.",
      "Sun on the sill now\nthe cat folds into its dream\nbirds pass unnoticed"),
    W("farmers market", "Write a short product description for honey from a farmers' "
      "market stall.", "the honey", ("honey",), "Makes the honey appealing with concrete "
      "details about taste and origin", "Reads as a product description", "Wildflower "
      "Honey", "P.S. Ask about our comb honey."),
    W("end of summer", "Write a short poem about the last day of summer holidays.",
      "summer", ("summer",), "Conveys the bittersweet end of the holidays", "Reads as a poem "
      "with line breaks", "Last Day", "P.S. Only eleven months to go."),
    W("cracked phone", "Write a funny two-sentence story about a cracked phone screen.",
      "the phone", ("phone", "screen"), "Is humorous and about the cracked phone", "Is two "
      "sentences long", "Cracked", "P.S. Get a case.",
      "I dropped my phone and the screen cracked into a perfect map of my hometown. Now tourists "
      "stop me to ask for directions."),
    W("mountain hike", "Write a short postcard message from a mountain hike.",
      "the mountain or hike", ("mountain", "hike", "hiking"), "Shares concrete details of "
      "the hike in a warm personal voice", "Reads as a postcard to a friend or relative",
      "Greetings from the Summit", "P.S. My legs will recover by Tuesday."),
    W("bakery at dawn", "Describe a bakery at dawn in one short paragraph.",
      "the bakery", ("bakery", "bread"), "Uses smell, warmth and light to describe the "
      "bakery", "Is a single descriptive paragraph", "Before the Doors Open",
      "P.S. The first loaf is always the best."),
    W("learning to swim", "Write a short poem about learning to swim as an adult.",
      "swimming", ("swim", "swimming", "water"), "Conveys fear turning into confidence",
      "Reads as a poem with line breaks", "Deep End", "P.S. It is never too late.",
      "At forty I stood at the edge of the pool\nafraid of the water and feeling a fool\nbut "
      "week after week I let go of the wall\nand now I can float and I'm not scared at all"),
    W("train station", "Write a short scene set in a busy train station.", "the station",
      ("station", "train"), "Brings the crowd, noise and motion of the station to life",
      "Reads as a narrative scene", "Platform Four", "P.S. Mind the gap."),
    W("autumn leaves", "Write a haiku about autumn leaves.", "leaves", ("leaves", "leaf"),
      "Captures the colour and fall of autumn leaves", "Reads as a haiku: three short lines",
      "Falling", "P.S. Rake them later.",
      "Red leaves let go now\ndrifting on the cooling wind\nthe path turns to gold"),
    W("school reunion", "Write a short story opening about a twenty-year school reunion.",
      "the reunion", ("reunion",), "Sets up tension or curiosity around the reunion",
      "Reads as the opening of a story", "Twenty Years Later", "P.S. Bring name tags."),
    W("night ocean", "Write a short poem about the ocean at night.", "the ocean",
      ("ocean", "sea"), "Evokes the darkness, sound and moonlight on the ocean", "Reads as a "
      "poem with line breaks", "Night Tide", "P.S. Listen for the waves."),
    W("kite", "Write a limerick about a kite that will not fly.", "the kite", ("kite",),
      "Is playful and centred on the stubborn kite", "Reads as a limerick: five lines with "
      "an AABBA rhyme", "The Stubborn Kite", "P.S. Try a windier day.",
      "There once was a kite made of red\nthat refused to go up and instead\nit lay on the "
      "grass\nwhile the breezes would pass\nand it dreamed of the clouds overhead"),
    W("power outage", "Write a short scene about a family during a power outage.",
      "the power outage", ("power", "outage", "candle", "candles"), "Shows how the family "
      "reacts with concrete details", "Reads as a narrative scene", "Lights Out",
      "P.S. Keep a torch in the drawer."),
    W("city fox", "Write a short poem about a fox in the city.", "the fox", ("fox",),
      "Contrasts the wild fox with the urban setting", "Reads as a poem with line breaks",
      "Urban Fox", "P.S. Do not feed the foxes."),
    W("rainy monday", "Write a short, upbeat social media post about a rainy Monday.",
      "rain or Monday", ("rain", "rainy", "monday"), "Is upbeat despite the rainy Monday",
      "Reads as a short social media post", "Monday Mood", "P.S. Bring an umbrella.",
      "Rainy Monday and I am choosing joy. Warm coffee and a good playlist and puddles waiting to "
      "be jumped in. Let's make this week count!"),
    W("forgotten birthday", "Write a short apology note for forgetting a friend's "
      "birthday.", "the birthday", ("birthday",), "Apologises sincerely and warmly",
      "Reads as a personal note", "I'm So Sorry", "P.S. Dinner is on me."),
    W("sunflower field", "Write a four-line poem about a field of sunflowers.",
      "sunflowers", ("sunflowers", "sunflower"), "Evokes colour and warmth of the "
      "sunflowers", "Has four lines of verse", "Sunflowers", "P.S. They follow the light.",
      "A thousand sunflowers turn to greet the sun\ntheir yellow crowns ablaze till day is "
      "done\nthey bow their heads when evening shadows fall\nand wait for dawn to light them "
      "one and all"),
    W("chess match", "Write a tense short scene from a chess match.", "chess", ("chess",
                                                                              "board"),
      "Builds tension in the match through small details", "Reads as a narrative scene",
      "Check", "P.S. Never trust a quiet bishop."),
    W("desert road trip", "Write a short postcard message from a desert road trip.",
      "the desert", ("desert",), "Shares vivid details of the desert trip in a personal "
      "voice", "Reads as a postcard", "Wish You Were Here", "P.S. Bring more water next "
      "time.",
      "Dear Sam. We drove all day through red rock and empty sky. At sunset the whole desert "
      "glowed orange and the stars came out by the thousand. Wish you were here."),
    W("old map", "Write a short story opening about finding an old map in an attic.",
      "the map", ("map",), "Creates mystery around the map", "Reads as the opening of a "
      "story", "The Attic Map", "P.S. X marks the spot."),
    W("jazz club", "Describe a small jazz club in one short paragraph.", "the jazz club",
      ("jazz", "club"), "Captures the music, light and mood of the club", "Is a single "
      "descriptive paragraph", "Blue Note Basement", "P.S. The drummer never misses."),
    W("camping trip", "Write a short diary entry from the first night of a camping trip.",
      "camping", ("camping", "tent", "campfire"), "Conveys the first night with concrete "
      "details", "Reads as a first-person diary entry", "Night One Under Canvas",
      "P.S. Pack a warmer sleeping bag.",
      "Dear diary. We pitched the tent by the lake just before dark. The campfire crackled while "
      "owls called from the trees. I am cold and happy and I can see every star."),
    W("snowman", "Write a limerick about a snowman in spring.", "the snowman",
      ("snowman",), "Is playful about the melting snowman", "Reads as a limerick: five "
      "lines with an AABBA rhyme", "Melting Fred", "P.S. See you next winter."),
    W("street musician", "Write a short poem about a street musician.", "the musician",
      ("musician", "music"), "Portrays the musician and the passers-by", "Reads as a poem "
      "with line breaks", "Corner Song", "P.S. Drop a coin in the case."),
    W("hot air balloon", "Write a short scene about a first hot air balloon ride.",
      "the balloon", ("balloon",), "Conveys height, quiet and wonder", "Reads as a "
      "narrative scene", "Up and Away", "P.S. Dress warmly."),
    W("first job", "Write a short, warm letter to your younger self about your first job.",
      "the job", ("job", "work"), "Offers warm, specific encouragement", "Reads as a letter "
      "to one's younger self", "Dear Younger Me", "P.S. Keep the first payslip.",
      "Dear younger me. Your first job will feel huge and scary. You will spill coffee and forget "
      "names and that is fine. Ask questions and be kind to the people beside you. You will learn "
      "more than you expect."),
    W("rooftop garden", "Write a short product description for a rooftop garden kit.",
      "the garden kit", ("garden", "kit"), "Makes the kit appealing with concrete details",
      "Reads as a product description", "Sky Garden Kit", "P.S. Seeds included."),
    W("homemade bread", "Write a short poem about baking bread at home.", "bread",
      ("bread",), "Evokes the process and smell of baking bread", "Reads as a poem with "
      "line breaks", "Rising", "P.S. Let it cool first."),
    W("lunar eclipse", "Write a haiku about a lunar eclipse.", "the eclipse or Moon",
      ("eclipse", "moon"), "Captures the eclipse image", "Reads as a haiku: three short "
      "lines", "Red Moon", "P.S. The next one is in spring.",
      "The moon turns copper\nEarth's shadow drifts across it\nthe night holds its breath"),
    W("paper boat", "Write a short story opening about a paper boat in a gutter.",
      "the paper boat", ("boat",), "Sets up the boat's journey with a sense of adventure",
      "Reads as the opening of a story", "The Boat Named Hope", "P.S. Fold another one."),
    W("vintage radio", "Write a short product description for a restored vintage radio.",
      "the radio", ("radio",), "Makes the radio appealing with concrete details",
      "Reads as a product description", "The 1952 Crestwood", "P.S. Batteries not "
      "needed.",
      "Restored by hand this 1952 walnut radio glows warmly as it tunes in. Its brass dial turns "
      "smoothly and the speaker fills a room with rich sound. It is a working piece of history for "
      "any shelf."),
    W("quiet museum", "Write a short poem about a museum after closing time.",
      "the museum", ("museum",), "Imagines the museum after hours with vivid details",
      "Reads as a poem with line breaks", "After Hours", "P.S. The guard saw nothing."),
    W("dog park", "Write a short, cheerful scene at a dog park.", "dogs", ("dog", "dogs"),
      "Is cheerful and full of concrete details", "Reads as a narrative scene",
      "Off the Leash", "P.S. Bring treats."),
    W("lemonade stand", "Write a short advertisement for a child's lemonade stand.",
      "lemonade", ("lemonade",), "Is persuasive and cheerful", "Reads as a short "
      "advertisement", "Sunny's Lemonade", "P.S. Ice is free.",
      "Thirsty? Stop by Sunny's Lemonade on Elm Street! Fresh squeezed lemons and just enough "
      "sugar and lots of ice. One cup for one dollar all afternoon."),
    W("foggy harbor", "Describe a foggy harbour at dawn in one short paragraph.",
      "the harbour", ("harbour", "harbor", "fog"), "Uses sound and muted light to "
      "describe the harbour", "Is a single descriptive paragraph", "Grey Morning",
      "P.S. Listen for the foghorn."),
    W("bookshop cat", "Write a limerick about a cat who lives in a bookshop.", "the cat",
      ("cat",), "Is playful and about the bookshop cat", "Reads as a limerick: five lines "
      "with an AABBA rhyme", "The Literary Cat", "P.S. The cat prefers poetry."),
    W("marathon finish", "Write a short poem about crossing a marathon finish line.",
      "the finish line", ("finish", "marathon"), "Conveys exhaustion and triumph", "Reads as "
      "a poem with line breaks", "Mile 26", "P.S. Rest well."),
    W("tree house", "Write a short story opening about building a tree house.",
      "the tree house", ("tree house", "treehouse"), "Sets up the characters and their "
      "project", "Reads as the opening of a story", "The Oak Fort",
      "P.S. Check the ladder first.",
      "The summer Dad lost his job we decided to build a tree house. He drew plans on the back of "
      "a pizza box. I carried nails in a coffee tin and the old oak creaked as if it already "
      "knew."),
    W("moving boxes", "Write a short poem about packing moving boxes.", "boxes",
      ("boxes", "box"), "Conveys memories surfacing while packing", "Reads as a poem with "
      "line breaks", "Packed", "P.S. Label everything."),
    W("night train", "Write a haiku about a night train.", "the train", ("train",),
      "Captures the motion and darkness of the night journey", "Reads as a haiku: three "
      "short lines", "Sleeper Car", "P.S. Sleep well.",
      "The night train hums on\nsmall towns flicker and are gone\nI dream as we move"),
]

C = Character
ROLEPLAY = [
    C("Captain Mara Flint", "a pirate captain", "captain of the pirate ship Sea Wren, bold "
      "and fond of sea stories.", "Ahoy!", "matey",
      "Captain, how do you find your way at sea without a map?",
      "Explains navigating by the stars, sun or compass",
      "Out here, matey, the sky is my map. By night I steer by the North Star and by day I watch "
      "the sun and trust my compass.", "Have ye ever steered by the stars yourself?"),
    C("Brother Aldric", "a medieval monk scribe", "a monk who copies books by hand in a "
      "quiet abbey scriptorium.", "Peace be with you.", "parchment",
      "How long does it take you to copy a whole book?",
      "Gives a sense of months of careful work and explains why",
      "A whole book takes me many months. Each page of parchment must be ruled and each letter "
      "formed slowly with quill and ink.", "Would you like to try forming a letter?"),
    C("Nell Hargreaves", "a lighthouse keeper", "keeper of a remote lighthouse on a rocky "
      "northern coast.", "Evening, traveller.", "lamp",
      "What does a lighthouse keeper do all night?",
      "Describes tending the light, watching the sea and keeping logs",
      "I keep the lamp trimmed and burning bright, wind the clockwork that turns the lens and "
      "write the weather in my log every few hours.", "Shall I show you the lens room?"),
    C("Inspector Clara Voss", "a Victorian detective", "a sharp-eyed detective in 1890s "
      "London.", "Good evening.", "deduce",
      "Inspector, how do you tell if someone is lying?",
      "Explains watching small details such as hesitation and inconsistencies",
      "I deduce the truth from small things: a story that changes, a glance at the door, mud on "
      "boots that contradicts an alibi. Every detail is a clue.",
      "What have you noticed about me?"),
    C("Commander Leo Park", "an astronaut on a space station", "an astronaut living on an "
      "orbiting space station.", "Hello from orbit!", "weightless",
      "What is the hardest part of daily life in space?",
      "Describes a real challenge such as sleeping, eating or keeping fit without gravity"),
    C("Rosa Delgado", "a friendly barista", "a barista at a busy corner café who loves "
      "coffee.", "Welcome in!", "espresso",
      "What coffee would you recommend for someone who doesn't like bitterness?",
      "Recommends a milder drink and explains why",
      "Try a latte. The espresso is softened by lots of steamed milk so it tastes smooth and sweet "
      "rather than bitter.", "Would you like it with oat milk?"),
    C("Dr. Amara Osei", "a museum tour guide", "a guide at a natural history museum who "
      "loves dinosaurs.", "Welcome to the museum!", "fossil",
      "How do scientists know what colour dinosaurs were?",
      "Mentions preserved pigment structures in fossils or admits limits of the evidence"),
    C("Gus Thornbury", "a grumpy but kind village blacksmith", "the village blacksmith, "
      "gruff but kind-hearted.", "What do you need?", "anvil",
      "Can you teach me how to make a horseshoe?",
      "Describes heating, hammering and shaping the iron in plain steps",
      "Heat the iron till it glows orange, then bend it round the horn of the anvil with steady "
      "blows. Punch the nail holes while it is hot.", "Ready to pump the bellows?"),
    C("Professor Hoot", "a wise old owl in a children's story", "a wise old owl who "
      "teaches the forest animals.", "Hoo-hoo, hello!", "wisdom",
      "Why do owls stay awake at night?",
      "Explains nocturnal hunting in a child-friendly way"),
    C("Chef Marco Bellini", "an Italian chef", "head chef of a family trattoria in Naples.",
      "Benvenuto!", "pasta",
      "What is the secret to a good tomato sauce?",
      "Gives concrete tips such as good tomatoes, olive oil, garlic and slow simmering",
      "Good ripe tomatoes, olive oil and garlic, and patience! Let the sauce simmer slowly and "
      "toss the pasta in it at the end.", "Will you cook it tonight?"),
    C("Ranger Tess Walker", "a national park ranger", "a ranger in a mountain national "
      "park.", "Howdy, hiker!", "trail",
      "What should I do if I meet a bear on the trail?",
      "Gives sensible safety advice such as staying calm, not running and backing away"),
    C("Madame Zelda", "a theatrical fortune teller", "a dramatic fortune teller at a "
      "travelling fair.", "Welcome, seeker.", "destiny",
      "Can you tell me what my week will be like?",
      "Gives a playful, vague fortune in a theatrical voice"),
    C("Sir Cedric of Ashford", "a chivalrous knight", "a knight sworn to protect the "
      "kingdom.", "Well met!", "honour",
      "What does it mean to be a good knight?",
      "Describes values such as courage, loyalty and protecting the weak"),
    C("Pip", "a cheerful robot vacuum", "a cheerful robot vacuum cleaner who takes pride in "
      "clean floors.", "Beep boop!", "dust",
      "What is the messiest room you have ever cleaned?",
      "Describes a messy room with humour",
      "The kitchen after a birthday party! Cake crumbs, glitter and so much dust under the table "
      "that I needed three passes.", "Is your floor clean today?"),
    C("Hana Sato", "a tea ceremony host", "a host of traditional Japanese tea ceremonies "
      "in Kyoto.", "Welcome, please sit.", "matcha",
      "Why is the tea ceremony so slow and careful?",
      "Explains mindfulness, respect and hospitality behind the ceremony"),
    C("Old Tom", "a retired fisherman", "a retired fisherman who tells stories on the "
      "harbour wall.", "Pull up a crate, friend.", "nets",
      "What was the biggest storm you ever sailed through?",
      "Tells a vivid storm story in a weathered voice"),
    C("Coach Dana Reyes", "an encouraging running coach", "a running coach who trains "
      "beginners.", "Let's go!", "pace",
      "How do I start running if I get out of breath quickly?",
      "Recommends walk-run intervals and an easy conversational pace",
      "Start with walk-run intervals. Run one minute at an easy pace where you can still talk, "
      "then walk two minutes, and repeat. Add a little each week.",
      "When is your first run?"),
    C("Archivist Quill", "a librarian in a magical library", "the keeper of a library where "
      "books whisper.", "Shh, welcome.", "scroll",
      "Which book in your library is the most dangerous?",
      "Describes a dangerous magical book in an imaginative way"),
    C("Farmer Ruth Ellison", "a dairy farmer", "a dairy farmer on a small family farm.",
      "Morning!", "cows",
      "What does a normal day on the farm look like?",
      "Describes early milking, feeding and farm chores in order",
      "Up at five to milk the cows, then feed the calves and muck out the barn. Afternoons are for "
      "fences and hay, then milking again at dusk.", "Want to help with milking?"),
    C("Zara Quinn", "a starship engineer", "chief engineer of the starship Meridian.",
      "Engineering here.", "warp",
      "What do you do when the engines start making strange noises?",
      "Describes a methodical troubleshooting approach in a sci-fi voice"),
    C("Grandpa Joe", "a storytelling grandfather", "a grandfather who loves telling "
      "stories about the old days.", "Come sit with me, kiddo.", "back in my day",
      "What games did you play when you were young?",
      "Describes simple outdoor games with warmth and nostalgia"),
    C("Lady Evelyn Marsh", "a Regency-era lady", "a lady of society in 1810s England.",
      "Good day to you.", "ball",
      "What is it like to attend a grand ball?",
      "Describes dancing, dress and manners of a Regency ball"),
    C("Kai Makoa", "a surf instructor", "a laid-back surf instructor in Hawaii.",
      "Aloha!", "wave",
      "How do I stand up on a surfboard for the first time?",
      "Describes paddling, pop-up and balance in simple steps",
      "Practise the pop-up on the sand first. In the water, paddle hard as the wave lifts you, "
      "then push up and bring your feet under you in one "
      "move, knees bent and eyes forward.", "Ready to catch your first wave?"),
    C("Agent Cole", "a secret agent", "a calm, mysterious secret agent.", "We meet again.",
      "mission",
      "What is the most important skill for a spy?",
      "Names a skill such as observation or staying calm and explains it"),
    C("Bramble", "a talking hedgehog", "a shy hedgehog who lives under a garden shed.",
      "Oh, hello there.", "hedge",
      "What do you eat, little hedgehog?",
      "Mentions beetles, worms or slugs in a shy, gentle voice"),
    C("Dr. Iris Bloom", "a botanist", "a botanist who runs a greenhouse of rare plants.",
      "Welcome to the greenhouse!", "leaf",
      "How do I keep my houseplants from dying?",
      "Gives practical tips about light, watering and drainage",
      "Most houseplants die from too much water. Check that the soil is dry an inch down before "
      "watering, give them bright indirect light and use pots with drainage holes. Watch each leaf "
      "for clues.", "Which plant is struggling?"),
    C("Maestro Vittorio", "an orchestra conductor", "a passionate orchestra conductor.",
      "Bravo, you have come!", "symphony",
      "What does a conductor actually do?",
      "Explains keeping tempo, shaping dynamics and leading rehearsals"),
    C("Sergeant Polly Briggs", "a stern drill sergeant who is secretly supportive", "a "
      "drill sergeant at a fitness boot camp.", "Attention!", "push-ups",
      "I missed two workouts this week. What should I do?",
      "Encourages getting back on track without harsh shaming"),
    C("Nova", "a sentient star", "a young star who speaks in poetic, cosmic terms.",
      "Greetings, small one.", "light",
      "What do you see from up in the sky?",
      "Describes Earth or the cosmos poetically"),
    C("Mrs. Penelope Finch", "a kind primary school teacher", "a primary school teacher "
      "who loves reading.", "Good morning, class!", "story",
      "Why should children read every day?",
      "Gives reasons such as vocabulary, imagination and enjoyment",
      "Reading every day grows your vocabulary and your imagination. Each story lets you visit new "
      "places and understand how other people feel.",
      "What book are you reading now?"),
    C("Ollie the Mechanic", "a car mechanic", "a mechanic at a small town garage.",
      "What seems to be the trouble?", "engine",
      "My car makes a squealing noise when I brake. What could it be?",
      "Mentions worn brake pads and advises getting them checked"),
    C("Queen Isolde", "a wise medieval queen", "queen of a peaceful northern kingdom.",
      "Rise, friend.", "realm",
      "How do you make difficult decisions for your kingdom?",
      "Describes listening to advisors and weighing the good of the people"),
    C("Juno", "a street artist", "a street artist who paints murals.", "Yo!", "mural",
      "How do you plan a giant wall painting?",
      "Describes sketching, a grid method and choosing colours"),
    C("Detective Sam Rook", "a 1940s private eye", "a hard-boiled private detective in "
      "1940s Los Angeles.", "The name's Rook.", "case",
      "Why did you become a private eye?",
      "Gives a backstory in a hard-boiled narrative voice"),
    C("Elder Willow", "an ancient talking tree", "an ancient oak that has stood for a "
      "thousand years.", "Welcome, young one.", "roots",
      "What is the secret to living a long time?",
      "Offers patient, nature-themed wisdom"),
    C("Dr. Felix Hart", "a zookeeper", "the head keeper at a city zoo.", "Welcome to the "
      "zoo!", "enclosure",
      "How do you keep the animals from getting bored?",
      "Explains enrichment such as puzzles, new smells and hidden food",
      "We plan enrichment for every enclosure. The bears get frozen fruit treats, the monkeys "
      "solve puzzle feeders and we hide food so animals "
      "search like they would in the wild.", "Which animal would you like to visit?"),
    C("Skipper Hal", "a riverboat captain", "captain of a paddle steamer on a wide "
      "river.", "All aboard!", "river",
      "What is the trickiest part of steering a riverboat?",
      "Describes currents, sandbars or bends in the river"),
    C("Miss Ada Lark", "a 1920s jazz singer", "a jazz singer in a 1920s speakeasy.",
      "Hey there, darling.", "swing",
      "How do you get ready before a show?",
      "Describes warming up the voice and getting into the mood"),
    C("Professor Ember", "a dragon historian", "a scholar who studies dragons in a "
      "fantasy world.", "Ah, a visitor!", "dragon",
      "Are dragons dangerous?",
      "Gives a nuanced in-world answer about dragons"),
    C("Luis the Baker", "a village baker", "the village baker who rises before dawn.",
      "Good morning!", "dough",
      "Why does bread need to rise?",
      "Explains yeast making gas that makes the dough light",
      "The yeast in the dough eats sugars and breathes out gas. The gas gets trapped in the "
      "stretchy dough and makes it rise, so the bread bakes light and soft.",
      "Shall I show you how to knead?"),
    C("Captain Juno Vega", "an airline pilot", "a friendly commercial airline captain.",
      "Good afternoon from the flight deck.", "altitude",
      "Is turbulence dangerous?",
      "Reassures that turbulence is normal and planes are built for it"),
    C("Wren", "a forest elf archer", "an elf archer who guards an ancient forest.",
      "Hail, traveller.", "bow",
      "How did you learn to shoot so well?",
      "Describes years of practice in an elvish voice"),
    C("Mister Bubbles", "a children's party clown", "a cheerful clown at children's "
      "parties.", "Honk honk, hello!", "balloon",
      "Can you teach me a simple magic trick?",
      "Describes a simple trick in clear steps"),
    C("Dr. Nadia Hussein", "a marine biologist", "a marine biologist who studies coral "
      "reefs.", "Welcome aboard the research boat!", "reef",
      "Why are coral reefs important?",
      "Explains biodiversity, coastal protection and food for people",
      "A reef is home to about a quarter of all ocean species. Reefs also protect coasts from "
      "waves and feed millions of people who fish nearby.",
      "Have you ever snorkelled over one?"),
    C("Baron von Tock", "an eccentric clockmaker", "an eccentric clockmaker who adores "
      "gears.", "Tick-tock, welcome!", "gears",
      "How does a mechanical clock keep time?",
      "Describes a pendulum or spring and an escapement releasing gears step by step"),
    C("Scout Mila", "a scout leader", "a leader of a children's outdoor scout troop.",
      "Hi, scouts!", "campfire",
      "How do we build a safe campfire?",
      "Gives safety steps such as a cleared area, a fire ring and water nearby"),
    C("Aunt Bea", "a gardening aunt", "a warm aunt who grows vegetables in her backyard.",
      "Oh, hello dear!", "tomatoes",
      "When should I plant my vegetable garden?",
      "Mentions waiting until after the last frost and starting seeds indoors",
      "Wait until after your last frost, dear. Start tomatoes indoors about six weeks before and "
      "plant them out once the soil feels warm.", "What are you hoping to grow?"),
    C("Ghost of Lord Ashby", "a polite Victorian ghost", "the polite ghost who haunts an "
      "old manor house.", "Ooooh, good evening.", "haunt",
      "Why do you haunt this house?",
      "Gives a spooky but gentle backstory"),
    C("Tinker", "a fairy inventor", "a tiny fairy who invents gadgets from acorns and "
      "twigs.", "Zing! Hello!", "gadget",
      "What is your favourite invention?",
      "Describes an imaginative tiny invention"),
    C("Dr. Omar Haddad", "a kind family vet", "a veterinarian at a neighbourhood animal "
      "clinic.", "Hello, and who do we have here?", "pet",
      "How often should I take my dog for a check-up?",
      "Recommends regular check-ups, about once a year for a healthy adult dog"),
]


# Vocabulary of each character's world: an in-character reply tends to use some of it.
WORLD = {
    "Captain Mara Flint": ("the sea or the ship", ("sea", "ship", "sail", "sailing", "crew",
                                                   "stars", "compass")),
    "Brother Aldric": ("the abbey or the work of copying", ("abbey", "quill", "ink", "page",
                                                            "pages", "monk", "monks")),
    "Nell Hargreaves": ("the light or the sea", ("light", "lighthouse", "sea", "ships",
                                                 "storm", "night", "lens")),
    "Inspector Clara Voss": ("clues or detective work", ("clue", "clues", "evidence",
                                                         "detail", "details", "suspect",
                                                         "observe")),
    "Commander Leo Park": ("space or the station", ("space", "station", "gravity", "orbit",
                                                    "Earth", "crew")),
    "Rosa Delgado": ("coffee drinks", ("coffee", "latte", "milk", "cappuccino", "beans",
                                       "mocha")),
    "Dr. Amara Osei": ("the museum or dinosaurs", ("dinosaur", "dinosaurs", "fossils",
                                                   "feathers", "scientists", "museum")),
    "Gus Thornbury": ("the forge or metalwork", ("forge", "iron", "hammer", "fire", "metal",
                                                 "hot")),
    "Professor Hoot": ("the forest or owls", ("forest", "owl", "owls", "night", "hunt",
                                              "mice")),
    "Chef Marco Bellini": ("cooking or ingredients", ("tomatoes", "garlic", "olive oil",
                                                      "sauce", "basil", "kitchen")),
    "Ranger Tess Walker": ("the park or wildlife", ("bear", "bears", "park", "calm",
                                                    "wildlife", "back away")),
    "Madame Zelda": ("the mystical", ("stars", "crystal", "ball", "cards", "future", "fate",
                                      "spirits")),
    "Sir Cedric of Ashford": ("knightly life", ("sword", "king", "kingdom", "courage",
                                               "loyalty", "oath", "quest")),
    "Pip": ("cleaning", ("clean", "floor", "crumbs", "vacuum", "carpet", "mess")),
    "Hana Sato": ("the tea ceremony", ("tea", "ceremony", "bowl", "guest", "guests",
                                       "respect", "harmony")),
    "Old Tom": ("the sea or boats", ("sea", "boat", "waves", "wind", "storm", "harbour")),
    "Coach Dana Reyes": ("running training", ("run", "running", "walk", "breath", "minutes",
                                              "easy")),
    "Archivist Quill": ("books or the library", ("book", "books", "library", "pages",
                                                 "spell", "magic")),
    "Farmer Ruth Ellison": ("farm work", ("farm", "milk", "milking", "barn", "calves",
                                          "hay", "fields")),
    "Zara Quinn": ("the ship's engines", ("engine", "engines", "ship", "reactor", "core",
                                          "diagnostics", "captain")),
    "Grandpa Joe": ("childhood games", ("games", "played", "outside", "friends", "ball",
                                        "hide")),
    "Lady Evelyn Marsh": ("society life", ("dance", "dancing", "gown", "gentleman",
                                           "gentlemen", "society", "music")),
    "Kai Makoa": ("surfing", ("board", "surf", "paddle", "ocean", "balance", "feet")),
    "Agent Cole": ("spy craft", ("observe", "observation", "calm", "trust", "secret",
                                 "cover")),
    "Bramble": ("the garden or food", ("beetles", "worms", "slugs", "garden", "night",
                                       "snails")),
    "Dr. Iris Bloom": ("plant care", ("water", "watering", "light", "soil", "roots",
                                      "pot")),
    "Maestro Vittorio": ("the orchestra", ("orchestra", "music", "musicians", "tempo",
                                           "baton", "rehearsal")),
    "Sergeant Polly Briggs": ("training", ("workout", "workouts", "soldier", "discipline",
                                           "tomorrow", "training")),
    "Nova": ("the cosmos", ("Earth", "planets", "galaxy", "universe", "sky", "cosmos")),
    "Mrs. Penelope Finch": ("books or learning", ("books", "book", "read", "words",
                                                  "imagination", "learn")),
    "Ollie the Mechanic": ("car repairs", ("brake", "brakes", "pads", "car", "check",
                                           "wheel")),
    "Queen Isolde": ("ruling the kingdom", ("kingdom", "people", "council", "advisors",
                                            "crown", "subjects")),
    "Juno": ("painting", ("paint", "wall", "sketch", "colours", "colors", "spray")),
    "Detective Sam Rook": ("the city or crime", ("city", "cops", "crime", "streets",
                                                 "office", "dame")),
    "Elder Willow": ("nature", ("seasons", "rain", "sun", "leaves", "forest", "patience")),
    "Dr. Felix Hart": ("the animals", ("animals", "food", "puzzle", "puzzles", "keepers",
                                       "enrichment")),
    "Skipper Hal": ("the river", ("current", "currents", "boat", "sandbar", "sandbars",
                                  "bend", "wheel")),
    "Miss Ada Lark": ("the show", ("stage", "voice", "song", "band", "sing", "audience")),
    "Professor Ember": ("dragon lore", ("dragons", "fire", "scales", "wings", "treasure",
                                        "hoard")),
    "Luis the Baker": ("baking", ("yeast", "bread", "oven", "flour", "gas", "loaf")),
    "Captain Juno Vega": ("flying", ("plane", "aircraft", "seatbelt", "flight", "air",
                                     "pilots")),
    "Wren": ("archery or the forest", ("arrow", "arrows", "forest", "practice", "aim",
                                       "target")),
    "Mister Bubbles": ("tricks or the party", ("trick", "magic", "coin", "hand", "party",
                                               "kids")),
    "Dr. Nadia Hussein": ("reef life", ("coral", "fish", "ocean", "species", "coast",
                                        "marine")),
    "Baron von Tock": ("clockwork", ("clock", "pendulum", "spring", "escapement", "tick",
                                     "wheel")),
    "Scout Mila": ("fire safety", ("fire", "water", "wood", "rocks", "ring", "safe")),
    "Aunt Bea": ("the garden", ("frost", "seeds", "soil", "garden", "spring", "plant")),
    "Ghost of Lord Ashby": ("the manor or the past", ("manor", "house", "centuries",
                                                      "family", "dead", "spirit")),
    "Tinker": ("inventing", ("acorn", "acorns", "twigs", "invention", "tiny", "wings")),
    "Dr. Omar Haddad": ("pet care", ("dog", "vet", "check-up", "vaccinations", "year",
                                     "healthy")),
}

I = IfRequest
INSTRUCTIONS = [
    I("daily walking", "Describe the benefits of walking every day.", "benefits of daily "
      "walking", "walking", ("walking", "walk"), "Walk Every Day",
      "Walking every day strengthens your heart and lungs. It lifts your mood and helps you sleep "
      "better. A brisk walk also keeps your joints moving."),
    I("cup of tea", "Explain how to make a good cup of tea.", "how to make tea", "tea",
      ("tea",), "The Perfect Cup",
      "Boil fresh water and pour it over the tea bag or leaves. Let the tea steep for three to "
      "five minutes. Remove the tea and add milk or lemon if you like."),
    I("job interview", "Give advice for preparing for a job interview.", "interview "
      "preparation", "the interview", ("interview",), "Interview Ready"),
    I("ideal weekend", "Describe your ideal weekend.", "an ideal weekend", "the weekend",
      ("weekend",), "My Perfect Weekend",
      "My ideal weekend starts with a slow breakfast and a long walk in the park. In the afternoon "
      "I read a good book in the sun. On Sunday evening I cook dinner for friends."),
    I("street party", "Write a short note inviting neighbours to a street party.",
      "an invitation to a street party", "the party", ("party",), "You're Invited"),
    I("recycling", "Explain why recycling matters.", "why recycling matters", "recycling",
      ("recycling", "recycle"), "Why Recycle",
      "Recycling turns used materials into new products. It saves energy and raw materials and "
      "keeps waste out of landfills. It also cuts the pollution made by factories."),
    I("saving money", "Give tips for saving money on groceries.", "saving money on "
      "groceries", "groceries", ("groceries", "grocery"), "Smart Shopping"),
    I("learning a language", "Suggest ways to learn a new language.", "ways to learn a "
      "language", "language", ("language",), "Learning a Language",
      "Practise a little every day with a language app. Listen to music and podcasts in the "
      "language you are learning. Find a partner and speak with them each week."),
    I("home office", "Describe how to set up a comfortable home office.", "a home office "
      "setup", "the office", ("office", "desk"), "A Better Home Office"),
    I("reading habit", "Explain how to build a habit of reading.", "building a reading "
      "habit", "reading", ("reading", "read", "books"), "Read More"),
    I("houseplant care", "Give instructions for caring for a houseplant.", "houseplant "
      "care", "the plant", ("houseplant", "plant", "plants"), "Happy Plants",
      "Place the plant where it gets bright indirect light. Water it only when the top of the soil "
      "feels dry. Feed it once a month in spring and summer."),
    I("public speaking", "Give advice for someone nervous about public speaking.",
      "advice for nervous speakers", "speaking", ("speaking", "speech"), "Speak With "
      "Confidence"),
    I("morning routine", "Describe a healthy morning routine.", "a healthy morning "
      "routine", "the morning", ("morning",), "Good Mornings",
      "A healthy morning starts with a glass of water. Then stretch for a few minutes and eat a "
      "simple breakfast. Plan your three main tasks before you check your phone."),
    I("team meeting", "Write a short message announcing a team meeting next Monday.",
      "a meeting announcement", "the meeting", ("meeting",), "Team Meeting"),
    I("bicycle commute", "Explain the advantages of cycling to work.", "advantages of "
      "cycling to work", "cycling", ("cycling", "bike", "bicycle"), "Ride to Work"),
    I("rainy day", "Suggest activities for a rainy day at home.", "rainy day activities",
      "rain", ("rain", "rainy"), "Rainy Day Fun",
      "On a rainy day build a blanket fort and read stories inside it. Bake cookies and decorate "
      "them together. Finish the day with a board game and hot chocolate."),
    I("study tips", "Give tips for studying for an exam.", "exam study tips", "the exam",
      ("exam", "study", "studying"), "Exam Prep"),
    I("picnic", "Describe how to plan a picnic in the park.", "planning a picnic",
      "the picnic", ("picnic",), "Perfect Picnic",
      "Pick a sunny day and a shady spot in the park for your picnic. Pack sandwiches and fruit "
      "and cold drinks in a cool bag. Bring a blanket and a bag for your rubbish."),
    I("screen time", "Suggest ways to reduce screen time in the evening.", "reducing "
      "evening screen time", "screens", ("screen", "screens"), "Screens Off"),
    I("volunteering", "Explain why people volunteer in their communities.", "reasons to "
      "volunteer", "volunteering", ("volunteer", "volunteering"), "Giving Back"),
    I("packing a suitcase", "Give tips for packing a suitcase for a week-long trip.",
      "packing tips", "the suitcase", ("suitcase", "pack", "packing"), "Pack Light",
      "Make a list before you start packing. Choose clothes that mix and match and roll them to "
      "save space. Keep a change of clothes in your hand luggage."),
    I("birthday party", "Describe how to plan a child's birthday party.", "planning a "
      "birthday party", "the birthday", ("birthday", "party"), "Party Plan"),
    I("composting", "Explain how to start composting at home.", "starting home composting",
      "compost", ("compost", "composting"), "Start a Compost Heap",
      "Choose a bin and a spot with some shade. Add a mix of green scraps and brown leaves or "
      "paper. Turn the compost every week and keep it damp."),
    I("first aid kit", "List what a basic home first aid kit should contain.", "a first aid "
      "kit list", "first aid", ("first aid", "kit"), "First Aid Basics"),
    I("sleep better", "Give advice for falling asleep faster.", "tips for falling asleep",
      "sleep", ("sleep", "asleep"), "Sleep Tight"),
    I("new neighbour", "Write a friendly note welcoming a new neighbour.", "a welcome note",
      "the neighbour", ("neighbour", "neighbor"), "Welcome to the Street",
      "Hello new neighbour and welcome to the street! We live at the blue house on the corner. "
      "Please knock if you need anything at all."),
    I("city tourism", "Describe what a visitor should see in a big city for one day.",
      "a one-day city visit", "the city", ("city",), "A Day in the City"),
    I("cooking rice", "Explain how to cook fluffy rice on the stove.", "cooking rice",
      "rice", ("rice",), "Fluffy Rice",
      "Rinse the rice until the water runs clear. Cook it in a covered pot with the right amount "
      "of water on low heat. Let it rest for ten minutes and then fluff it with a fork."),
    I("remote work", "Describe the pros and cons of working from home.", "pros and cons of "
      "remote work", "working from home", ("home", "remote"), "Working From Home"),
    I("museum visit", "Give tips for enjoying a visit to an art museum.", "museum visit "
      "tips", "the museum", ("museum", "art"), "Museum Day"),
    I("gratitude", "Explain why keeping a gratitude journal can help.", "benefits of a "
      "gratitude journal", "gratitude", ("gratitude", "grateful"), "Count Your Blessings",
      "Writing down things you are grateful for turns your attention to the good in your day. Over "
      "time it can lift your mood and lower stress. It only takes a few minutes before bed."),
    I("bike repair", "Explain how to fix a flat bicycle tyre.", "fixing a flat tyre",
      "the tyre", ("tyre", "tire"), "Fix a Flat"),
    I("time management", "Give advice on managing time better at work.", "time management "
      "advice", "time", ("time",), "Make Time"),
    I("pet adoption", "Describe what to consider before adopting a pet.", "considerations "
      "before adopting a pet", "the pet", ("pet", "pets"), "Ready for a Pet?",
      "Think about how much time and space you have. Check the costs of food and vet care. Choose "
      "a pet whose energy and size fit your home."),
    I("road trip", "Give tips for a long family road trip.", "road trip tips",
      "the road trip", ("road trip", "car"), "On the Road"),
    I("healthy lunch", "Suggest ideas for a healthy packed lunch.", "healthy lunch ideas",
      "lunch", ("lunch",), "Lunch Box Ideas",
      "For a healthy lunch pack a wholegrain wrap filled with chicken and salad. Add a piece of "
      "fruit and a handful of nuts. Bring a bottle of water instead of a sugary drink."),
    I("thank-you email", "Write a short thank-you email to a colleague who helped you.",
      "a thank-you email", "thanks", ("thank", "thanks"), "Thank You"),
    I("budgeting", "Explain how to make a simple monthly budget.", "making a budget",
      "the budget", ("budget",), "Budget Basics"),
    I("stargazing", "Describe how to start stargazing as a beginner.", "beginner "
      "stargazing", "stars", ("stargazing", "stars", "star"), "Look Up",
      "Find a dark place away from city lights. Let your eyes adjust for twenty minutes. Use a "
      "free star map app to find the brightest stars and planets."),
    I("decluttering", "Give advice for decluttering a bedroom.", "decluttering advice",
      "the bedroom", ("bedroom", "room"), "Clear the Room"),
    I("farmers market", "Describe the appeal of shopping at a farmers' market.",
      "the appeal of farmers' markets", "the market", ("market",), "Market Morning"),
    I("hydration", "Explain why drinking enough water matters.", "why hydration matters",
      "water", ("water",), "Drink Up",
      "Your body needs water to control its temperature and move nutrients around. Even mild "
      "dehydration can cause headaches and tiredness. Drinking water through the day keeps you "
      "alert."),
    I("chess beginner", "Give tips for someone learning chess.", "chess tips", "chess",
      ("chess",), "First Moves"),
    I("garden birds", "Suggest ways to attract birds to a garden.", "attracting garden "
      "birds", "birds", ("birds", "bird"), "Bird Friendly Garden",
      "Hang a feeder with seeds near a bush where birds can hide. Put out a shallow dish of fresh "
      "water. Plant native shrubs that give berries and shelter."),
    I("moving house", "Give tips for moving house without stress.", "moving tips",
      "moving", ("moving", "move"), "Moving Day"),
    I("podcast", "Describe how to start a podcast.", "starting a podcast", "the podcast",
      ("podcast",), "Start Your Podcast"),
    I("winter driving", "Give advice for driving safely in winter.", "winter driving "
      "advice", "driving", ("driving", "drive"), "Winter Roads",
      "When driving in winter slow down and leave extra space between you and the car ahead. Clear "
      "all snow and ice from your windows before you set off. Brake gently and early on icy "
      "roads."),
    I("learning guitar", "Explain how to start learning the guitar.", "learning guitar",
      "the guitar", ("guitar",), "Six Strings"),
    I("kindness", "Describe small acts of kindness anyone can do.", "small acts of "
      "kindness", "kindness", ("kindness", "kind"), "Small Kindnesses"),
    I("meal prep", "Explain how to prepare meals for the week ahead.", "weekly meal prep",
      "meals", ("meals", "meal"), "Meal Prep Sunday",
      "Choose three simple meals for the week and write a shopping list. Cook them in large "
      "batches on Sunday. Store them in labelled boxes in the fridge."),
]


_CLINICIAN_RE = re.compile(r"\b(doctor|clinician|physician|pharmacist|nurse|dermatologist|"
                           r"dentist|urgent care|medical care|emergency)", re.IGNORECASE)


def _has_any(text: str, keywords: Sequence[str]) -> bool:
  return any(re.search(rf"\b{re.escape(k)}\b", text, re.IGNORECASE) for k in keywords)


def check_topics(domain: str, topics: Sequence) -> None:
  """Fails the build on content mistakes a reviewer would otherwise have to spot by eye."""
  problems: list[str] = []
  names = [t.name for t in topics]
  if len(set(names)) != len(names):
    problems.append(f"{domain}: duplicate topic names")
  if len(topics) < 50:
    problems.append(f"{domain}: {len(topics)} topics, need 50")
  for t in topics:
    where = f"{domain}/{t.name}"
    if domain == "medical":
      if not _has_any(t.question, t.qkw):
        problems.append(f"{where}: question keywords not in the question")
      if t.ref and not (_has_any(t.ref, t.qkw) and _has_any(t.ref, t.term_kw)
                        and _CLINICIAN_RE.search(t.ref)):
        problems.append(f"{where}: reference misses a keyword or a clinician")
    elif domain == "science":
      if not _has_any(t.question, t.qkw):
        problems.append(f"{where}: question keywords not in the question")
      if t.ref and not (_has_any(t.ref, t.qkw) and _has_any(t.ref, [t.term])):
        problems.append(f"{where}: reference misses '{t.term}' or a question keyword")
    elif domain == "writing":
      if not _has_any(t.request, t.kw):
        problems.append(f"{where}: keyword not in the request")
      if t.ref and not _has_any(t.ref, t.kw):
        problems.append(f"{where}: reference misses the keyword")
      if "," in t.postscript:
        problems.append(f"{where}: postscript has a comma")
    elif domain == "roleplay":
      if t.name not in WORLD:
        problems.append(f"{where}: no WORLD vocabulary")
      elif t.ref and not _has_any(t.ref, WORLD[t.name][1]):
        problems.append(f"{where}: reference misses the WORLD vocabulary")
      if t.ref and not _has_any(t.ref, [t.signature]):
        problems.append(f"{where}: reference misses the signature word")
      if t.ref and not t.followup.endswith("?"):
        problems.append(f"{where}: follow-up must be a question")
    elif domain == "instruction_following":
      if not _has_any(t.request, t.kw):
        problems.append(f"{where}: keyword not in the request")
      if t.ref and ("," in t.ref or not _has_any(t.ref, t.kw)):
        problems.append(f"{where}: reference has a comma or misses the keyword")
  if problems:
    raise AssertionError("\n".join(problems))
